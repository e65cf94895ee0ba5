// Whole eager ops without a Python frame: elementwise ops' common case (register_fast_kernel) and
// clone/.contiguous() (register_clone_kernel), with their allocation counter. See native.cpp.

#include "native.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/TensorImpl.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <unordered_map>

namespace jaxdev_native {

// --- whole eager ops without a Python frame -----------------------------------------------------
//
// register_fast_kernel(name, slow, tensors, bodies) makes aten::`name`'s PrivateUse1 kernel a C++ one
// for the common case of an elementwise op: its first `tensors` arguments are plain jax tensors (whole
// storage, default strides, not empty) of one dtype, and every other argument is at its schema default.
// Then `bodies(dtype)` (asked once per dtype; None: never fast) is (the op's jitted body, called on the
// arrays, its result's dtype: a comparison's is bool); the result becomes the output tensor (contiguous: PyTorch lays out an elementwise result of plain inputs so). Anything else, or any exception, goes to `slow`, an operator
// of the same schema in namespace jaxdev_slow whose PrivateUse1 kernel is jaxdev's Python kernel: it
// computes the same thing, or raises PyTorch's error. Every 256 fast calls tensor._checkpoint runs (the
// sweeps and the executables' check that wrap runs after each result).

struct FastBody {
  PyObject* body;    // the jitted body (owned), or Py_None: this dtype is never fast
  PyObject* result;  // the result's torch.dtype (owned)
};

struct FastOp {
  c10::OperatorHandle slow;
  size_t tensors;
  PyObject* bodies;  // dtype -> None, or (jitted body, result dtype)
  std::unordered_map<int, FastBody> body_of_dtype;
};

// Keyed by the aten operator's schema, whose address is fixed for the life of the process.
std::unordered_map<const void*, FastOp*>* g_fast = new std::unordered_map<const void*, FastOp*>;
PyObject* g_next_address = nullptr;  // tensor._next_address, the fake addresses' counter
PyObject* g_checkpoint = nullptr;    // tensor._checkpoint
unsigned g_fast_calls = 0;

bool same_default(const c10::IValue& given, const std::optional<c10::IValue>& dflt) {
  if (!dflt) return false;
  const c10::IValue& d = *dflt;
  if (given.isNone() || d.isNone()) return given.isNone() && d.isNone();
  if (given.isInt() && d.isInt()) return given.toInt() == d.toInt();
  if (given.isBool() && d.isBool()) return given.toBool() == d.toBool();
  if (given.isDouble() && d.isDouble()) return given.toDouble() == d.toDouble();
  return false;
}

// The output tensor holding `result` (a new reference, stolen) at the next fake address: the tail of
// every native kernel. Every 256 of them, tensor._checkpoint runs. Undefined on failure.
at::Tensor wrap_result(PyObject* result, PyObject* dtype) {
  at::Tensor out;
  PyObject* address = result ? PyIter_Next(g_next_address) : nullptr;
  bool ok = result && address && wrap_array(result, dtype, address, out);
  Py_XDECREF(result);
  Py_XDECREF(address);
  if (!ok) return {};
  if (++g_fast_calls % 256 == 0) {
    PyObject* r = PyObject_CallNoArgs(g_checkpoint);
    if (!r) PyErr_Clear();  // the next Python wrap's checkpoint reports it
    Py_XDECREF(r);
  }
  return out;
}

// Runs `attempt` (the native path) with the GIL; its output replaces the op's `nargs` arguments on
// the stack, or, when it gives none (or throws), `slow` (the Python kernel) runs the op instead.
// Set by set_python_kernels (jaxdev/eager_modes.py): every native kernel takes its Python slow path, so
// that the fused and sync eager modes see every op (the fast paths would run it at once, unrecorded).
bool g_python_kernels = false;

template <typename Attempt>
void run_native(Attempt attempt, size_t nargs, const c10::OperatorHandle& slow, torch::jit::Stack* stack) {
  if (g_python_kernels) {
    slow.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
    return;
  }
  at::Tensor out;
  {
    PyGILState_STATE gil = PyGILState_Ensure();
    try {
      out = attempt();
    } catch (const std::exception&) {
      out = at::Tensor();  // the slow path meets the same condition and reports it
    }
    PyErr_Clear();
    PyGILState_Release(gil);
  }
  if (out.defined()) {
    torch::jit::drop(*stack, nargs);
    torch::jit::push(*stack, std::move(out));
    return;
  }
  slow.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
}

// The output of the fast path, or an undefined tensor when the op must take the slow one (no Python
// error is left set either way). Runs with the GIL held.
at::Tensor try_fast(FastOp& op, const c10::OperatorHandle& handle, torch::jit::Stack* stack) {
  const auto& schema = handle.schema();
  size_t nargs = schema.arguments().size();
  auto args = torch::jit::last(*stack, nargs);
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  for (size_t i = 0; i < nargs; i++) {
    const c10::IValue& v = args[i];
    if (i < op.tensors) {
      if (!v.isTensor()) return {};
      const at::Tensor& t = v.toTensor();
      if (!t.defined() || t.numel() == 0 || !is_plain(t)) return {};
      if (i == 0) dtype = t.scalar_type();
      else if (t.scalar_type() != dtype) return {};
    } else if (!same_default(v, schema.arguments()[i].default_value())) {
      return {};
    }
  }
  auto found = op.body_of_dtype.find(static_cast<int>(dtype));
  FastBody fast;
  if (found == op.body_of_dtype.end()) {
    PyObject* dtype_obj = reinterpret_cast<PyObject*>(torch::getTHPDtype(dtype));
    PyObject* got = PyObject_CallOneArg(op.bodies, dtype_obj);
    if (!got) {
      PyErr_Clear();
      return {};
    }
    if (PyTuple_Check(got) && PyTuple_GET_SIZE(got) == 2 && THPDtype_Check(PyTuple_GET_ITEM(got, 1))) {
      fast = {PyTuple_GET_ITEM(got, 0), PyTuple_GET_ITEM(got, 1)};
    } else {  // None, or anything else: this dtype is never fast
      fast = {Py_None, dtype_obj};
    }
    Py_INCREF(fast.body);
    Py_INCREF(fast.result);
    Py_DECREF(got);
    op.body_of_dtype[static_cast<int>(dtype)] = fast;  // keeps the references
  } else {
    fast = found->second;
  }
  if (fast.body == Py_None) return {};
  PyObject* body = fast.body;
  if (!drop_dead_boxes()) {
    PyErr_Clear();
    return {};
  }
  PyObject* arrays[8];
  size_t n = std::min<size_t>(op.tensors, 8);
  for (size_t i = 0; i < n; i++) {
    PyObject* a = plain_array(args[i].toTensor());
    if (!a || a == Py_None) {
      for (size_t j = 0; j < i; j++) Py_DECREF(arrays[j]);
      Py_XDECREF(a);
      PyErr_Clear();
      return {};
    }
    arrays[i] = a;
  }
  PyObject* result = PyObject_Vectorcall(body, arrays, n, nullptr);
  for (size_t i = 0; i < n; i++) Py_DECREF(arrays[i]);
  return wrap_result(result, fast.result);
}

void fast_kernel(const c10::OperatorHandle& handle, c10::DispatchKeySet, torch::jit::Stack* stack) {
  FastOp* op = g_fast->at(&handle.schema());
  run_native([&] { return try_fast(*op, handle, stack); }, handle.schema().arguments().size(), op->slow, stack);
}

PyObject* register_fast_kernel(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1]) || !PyLong_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "register_fast_kernel(name: str, slow: str, tensors: int, bodies)");
    return nullptr;
  }
  if (!check_ready() || !g_next_address) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "jaxdev native: set_allocation was not called");
    return nullptr;
  }
  std::string name = PyUnicode_AsUTF8(args[0]);  // "add.Tensor" (aten)
  std::string slow = PyUnicode_AsUTF8(args[1]);  // "jaxdev_slow::add.Tensor"
  long tensors = PyLong_AsLong(args[2]);
  if (tensors < 1 || tensors > 8) {
    PyErr_SetString(PyExc_ValueError, "register_fast_kernel: 1 to 8 tensor arguments");
    return nullptr;
  }
  try {
    auto dot = slow.find('.');
    auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(
        slow.substr(0, dot).c_str(), dot == std::string::npos ? "" : slow.substr(dot + 1).c_str());
    auto aten_dot = name.find('.');
    auto aten = c10::Dispatcher::singleton().findSchemaOrThrow(
        ("aten::" + name.substr(0, aten_dot)).c_str(),
        aten_dot == std::string::npos ? "" : name.substr(aten_dot + 1).c_str());
    Py_INCREF(args[3]);
    (*g_fast)[&aten.schema()] = new FastOp{handle, static_cast<size_t>(tensors), args[3], {}};
    private_use1_kernels().impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&fast_kernel>());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

// --- clone and .contiguous() without a Python frame ---------------------------------------------
//
// register_clone_kernel(slow, reader, sharded): aten::clone's PrivateUse1 kernel for its common cases,
// a result that is contiguous (`.contiguous()` of anything; clone of a tensor with default strides):
// * a plain tensor (its whole storage): the result holds the very same array (arrays are immutable);
// * a view of a plain box: reader(tensor) (asked once per view geometry, kept in a dict keyed by
//   sizes, strides, offset, dtype and the box's numel and dtype) is (program, offset): the jitted
//   program reading it from the box's array as stored, called with (array, offset), and the offset as
//   a device scalar (tensor.offset_arg; None for offset 0); None: that geometry is never fast.
// Anything else (conj/neg bits, empty, other memory formats, a box holding a logical value, a storage
// slice's box, any storage placed over a mesh while `sharded` is non-empty) and any exception take
// `slow` (jaxdev_slow::clone), the Python kernel.

struct CloneOp {
  c10::OperatorHandle slow;
  PyObject* reader;   // tensor -> (jitted read program (stored, offset), offset argument) or None
  PyObject* sharded;  // tensor.SHARDED_ENTRIES (a dict): any entry sends every view to the slow path
  PyObject* readers;  // geometry tuple -> (program, offset argument) or None
};
CloneOp* g_clone = nullptr;

PyObject* geometry_key(const c10::TensorImpl* impl, PyObject* box) {
  auto sizes = impl->sizes();
  auto strides = impl->strides();
  size_t n = sizes.size();
  PyObject* numel = PyObject_GetAttr(box, s_numel);
  if (!numel) return nullptr;
  PyObject* dtype = PyObject_GetAttr(box, s_dtype);
  if (!dtype) {
    Py_DECREF(numel);
    return nullptr;
  }
  PyObject* key = PyTuple_New(2 * n + 4);
  if (!key) {
    Py_DECREF(numel);
    Py_DECREF(dtype);
    return nullptr;
  }
  for (size_t i = 0; i < n; i++) {
    PyTuple_SET_ITEM(key, i, PyLong_FromLongLong(sizes[i]));
    PyTuple_SET_ITEM(key, n + i, PyLong_FromLongLong(strides[i]));
  }
  PyTuple_SET_ITEM(key, 2 * n, PyLong_FromLongLong(impl->storage_offset()));
  PyTuple_SET_ITEM(key, 2 * n + 1, PyLong_FromLong(static_cast<long>(impl->dtype().toScalarType())));
  PyTuple_SET_ITEM(key, 2 * n + 2, numel);  // steals
  PyTuple_SET_ITEM(key, 2 * n + 3, dtype);  // steals
  for (size_t i = 0; i < 2 * n + 2; i++) {
    if (!PyTuple_GET_ITEM(key, i)) {
      Py_DECREF(key);
      return nullptr;
    }
  }
  return key;
}

// (read program, offset argument) for `self`, a view of `box`, or None (a new reference; nullptr:
// the slow path).
PyObject* view_program(const at::Tensor& self, PyObject* box) {
  PyObject* key = geometry_key(self.unsafeGetTensorImpl(), box);
  if (!key) return nullptr;
  PyObject* program = PyDict_GetItemWithError(g_clone->readers, key);  // borrowed
  if (program) {
    Py_INCREF(program);
  } else if (!PyErr_Occurred()) {  // first view of this geometry: ask Python, keep the answer
    PyObject* tensor = THPVariable_Wrap(self);
    program = tensor ? PyObject_CallOneArg(g_clone->reader, tensor) : nullptr;
    Py_XDECREF(tensor);
    if (program) {
      if (PyDict_Size(g_clone->readers) >= 4096) PyDict_Clear(g_clone->readers);  // many offsets: start over
      if (PyDict_SetItem(g_clone->readers, key, program) != 0) Py_CLEAR(program);
    }
  }
  Py_DECREF(key);
  return program;
}

// The clone's value (a new reference), or nullptr for the slow path (the caller clears any error).
PyObject* clone_value(const at::Tensor& self) {
  PyObject* array = plain_array(self);
  if (!array) return nullptr;
  if (array != Py_None) return array;  // a plain tensor: its clone holds the same immutable array
  Py_DECREF(array);
  if (PyDict_GET_SIZE(g_clone->sharded) != 0) return nullptr;
  const c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  PyObject* box = physical_box(impl);  // held across the Python calls below
  if (!box || box == Py_None) {
    Py_XDECREF(box);
    return nullptr;
  }
  PyObject* value = nullptr;
  PyObject* reader = view_program(self, box);
  if (reader && PyTuple_Check(reader) && PyTuple_GET_SIZE(reader) == 2) {
    PyObject* stored = PyObject_GetAttr(box, s_array);
    if (stored) {
      PyObject* call_args[2] = {stored, PyTuple_GET_ITEM(reader, 1)};
      value = PyObject_Vectorcall(PyTuple_GET_ITEM(reader, 0), call_args, 2, nullptr);
      Py_DECREF(stored);
    }
  }
  Py_XDECREF(reader);
  Py_DECREF(box);
  return value;
}

at::Tensor try_clone(torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 2);
  if (!args[0].isTensor()) return {};
  const at::Tensor& self = args[0].toTensor();
  if (!self.defined() || self.numel() == 0 || self.is_conj() || self.is_neg()) return {};
  const c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  if (impl->device_type() != c10::DeviceType::PrivateUse1 || !impl->has_storage()) return {};
  auto format = args[1].isNone() ? c10::MemoryFormat::Preserve : args[1].toMemoryFormat();
  bool contiguous_result = format == c10::MemoryFormat::Contiguous ||
                           (format == c10::MemoryFormat::Preserve && is_plain(self));
  if (!contiguous_result) return {};
  if (!drop_dead_boxes()) return {};
  return wrap_result(clone_value(self), reinterpret_cast<PyObject*>(torch::getTHPDtype(self.scalar_type())));
}

void clone_kernel(const c10::OperatorHandle& handle, c10::DispatchKeySet, torch::jit::Stack* stack) {
  run_native([&] { return try_clone(stack); }, 2, g_clone->slow, stack);
}

PyObject* register_clone_kernel(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyUnicode_Check(args[0]) || !PyCallable_Check(args[1]) || !PyDict_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "register_clone_kernel(slow: str, reader, sharded: dict)");
    return nullptr;
  }
  if (!check_ready() || !g_next_address) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "jaxdev native: set_allocation was not called");
    return nullptr;
  }
  try {
    std::string slow = PyUnicode_AsUTF8(args[0]);  // "jaxdev_slow::clone"
    auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(slow.c_str(), "");
    PyObject* readers = PyDict_New();
    if (!readers) return nullptr;
    Py_INCREF(args[1]);
    Py_INCREF(args[2]);
    g_clone = new CloneOp{handle, args[1], args[2], readers};
    private_use1_kernels().impl("clone", torch::CppFunction::makeFromBoxedFunction<&clone_kernel>());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* set_allocation(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyIter_Check(args[0]) || !PyCallable_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "set_allocation(addresses: iterator, checkpoint: callable)");
    return nullptr;
  }
  Py_INCREF(args[0]);
  Py_XSETREF(g_next_address, args[0]);
  Py_INCREF(args[1]);
  Py_XSETREF(g_checkpoint, args[1]);
  Py_RETURN_NONE;
}

// What torch/csrc/acc's PythonDeviceGuard does, every answer fixed (one device, one default stream,
// no-op events), with the device type known here rather than asked of Python.

PyObject* set_python_kernels(PyObject*, PyObject* flag) {
  int on = PyObject_IsTrue(flag);
  if (on < 0) return nullptr;
  g_python_kernels = on != 0;
  Py_RETURN_NONE;
}

}  // namespace jaxdev_native
