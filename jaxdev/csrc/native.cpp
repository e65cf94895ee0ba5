// jaxdev's native fast paths: the few steps of every eager op that cost microseconds in Python.
//
// Built on first use by jaxdev/native.py (one compiler call, against the torch that is installed)
// and optional: every function here has a Python twin that jaxdev uses when this module cannot be
// built. Each does exactly what its twin does, only without the Python frames:
//
//   register_cpu_kernels(names)  PrivateUse1 kernels that redispatch to CPU's kernel (view ops, whose
//                                CPU kernels write only metadata): a view costs what it costs on CPU.
//   new_tensor(shape, dtype, address)
//                                a contiguous jax tensor on a new storage named by a fake address.
//   set_boxes(BOXES, Box)        the storage -> Box dictionary that the readers below look in, and
//                                the Box class (a subclass, such as a storage slice's, is left to Python).
//   plain_value(t)               the jax.Array of a tensor that is its whole storage, row-major (the
//                                hot path of tensor.read), or None when it is anything else.
//   plain_values(args)           plain_value of every tensor in args, other values as they are, or
//                                None as soon as one tensor is not plain.
//   all_plain(args)              every tensor in args (and in lists/tuples among them) is contiguous
//                                with PyTorch's default strides (layout._plain).
//
// The CPython API is used directly (no pybind11): the module compiles in seconds.

#include <Python.h>

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/library.h>

#include <vector>

namespace {

PyObject* g_boxes = nullptr;     // tensor.BOXES
PyObject* g_box_type = nullptr;  // tensor.Box
PyObject* s_logical = nullptr;
PyObject* s_array = nullptr;
PyObject* s_dtype = nullptr;
PyObject* s_shape = nullptr;

void redispatch_to_cpu(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
}

// Kept for the life of the process, as a TORCH_LIBRARY_IMPL block would be.
torch::Library* g_cpu_kernels = nullptr;

PyObject* register_cpu_kernels(PyObject*, PyObject* names) {
  PyObject* seq = PySequence_Fast(names, "register_cpu_kernels takes a list of operator names");
  if (!seq) return nullptr;
  try {
    if (!g_cpu_kernels) {
      g_cpu_kernels =
          new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
      const char* name = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i));
      if (!name) {
        Py_DECREF(seq);
        return nullptr;
      }
      g_cpu_kernels->impl(name, torch::CppFunction::makeFromBoxedFunction<&redispatch_to_cpu>());
    }
  } catch (const std::exception& e) {
    Py_DECREF(seq);
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_DECREF(seq);
  Py_RETURN_NONE;
}

// As torch._C._construct_storage_from_data_pointer makes it: byte-sized, no allocator, not resizable
// (a resize goes through jaxdev's own resize_ kernel, which gives the tensor a new storage).
PyObject* new_tensor(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyTuple_Check(args[0]) || !THPDtype_Check(args[1]) || !PyLong_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "new_tensor(shape: tuple, dtype: torch.dtype, address: int)");
    return nullptr;
  }
  Py_ssize_t ndim = PyTuple_GET_SIZE(args[0]);
  std::vector<int64_t> sizes(ndim);
  int64_t numel = 1;
  for (Py_ssize_t i = 0; i < ndim; i++) {
    sizes[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(args[0], i));
    if (sizes[i] < 0) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "new_tensor: negative size");
      return nullptr;
    }
    numel *= sizes[i];
  }
  void* address = PyLong_AsVoidPtr(args[2]);
  if (PyErr_Occurred()) return nullptr;
  try {
    auto meta = c10::scalarTypeToTypeMeta(reinterpret_cast<THPDtype*>(args[1])->scalar_type);
    c10::DataPtr data(address, c10::Device(c10::DeviceType::PrivateUse1, 0));
    c10::Storage storage(c10::make_intrusive<c10::StorageImpl>(
        c10::StorageImpl::use_byte_size_t(), numel * static_cast<int64_t>(meta.itemsize()), std::move(data),
        /*allocator=*/nullptr, /*resizable=*/false));
    // TensorImpl adds the autograd and autocast keys of the backend itself (none in inference mode).
    auto t = at::detail::make_tensor<c10::TensorImpl>(
        std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), meta);
    t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
    return THPVariable_Wrap(std::move(t));
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyObject* set_boxes(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyDict_Check(args[0]) || !PyType_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "set_boxes(BOXES: dict, Box: type)");
    return nullptr;
  }
  Py_INCREF(args[0]);
  Py_XSETREF(g_boxes, args[0]);
  Py_INCREF(args[1]);
  Py_XSETREF(g_box_type, args[1]);
  Py_RETURN_NONE;
}

// The array of jax tensor `t` when t is its whole storage, row-major, in the box's dtype and shape,
// with no conj/neg bit (a new reference); Py_None (a new reference) otherwise; nullptr on error.
PyObject* plain_array(const at::Tensor& t) {
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (impl->device_type() != c10::DeviceType::PrivateUse1 || !impl->has_storage() || impl->storage_offset() != 0 ||
      !impl->is_contiguous() || impl->is_conj() || impl->is_neg()) {
    Py_RETURN_NONE;
  }
  const c10::StorageImpl* storage = impl->unsafe_storage().unsafeGetStorageImpl();
  PyObject* key = PyLong_FromVoidPtr(const_cast<void*>(storage->data()));
  if (!key) return nullptr;
  PyObject* box = PyDict_GetItemWithError(g_boxes, key);  // borrowed
  Py_DECREF(key);
  if (!box) {
    if (PyErr_Occurred()) return nullptr;
    Py_RETURN_NONE;  // no box: the slow path raises the right error
  }
  if (Py_TYPE(box) != reinterpret_cast<PyTypeObject*>(g_box_type)) Py_RETURN_NONE;  // e.g. a storage slice's
  PyObject* logical = PyObject_GetAttr(box, s_logical);
  if (!logical) return nullptr;
  bool physical = logical == Py_None;
  Py_DECREF(logical);
  if (!physical) Py_RETURN_NONE;
  PyObject* dtype = PyObject_GetAttr(box, s_dtype);
  if (!dtype) return nullptr;
  bool same_dtype = dtype == reinterpret_cast<PyObject*>(torch::getTHPDtype(c10::typeMetaToScalarType(impl->dtype())));
  Py_DECREF(dtype);
  if (!same_dtype) Py_RETURN_NONE;
  PyObject* array = PyObject_GetAttr(box, s_array);
  if (!array) return nullptr;
  if (array == Py_None) return array;  // no physical array (the slow path knows why)
  PyObject* shape = PyObject_GetAttr(array, s_shape);
  if (!shape) {
    Py_DECREF(array);
    return nullptr;
  }
  auto sizes = impl->sizes();
  bool same_shape = PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) == static_cast<Py_ssize_t>(sizes.size());
  for (size_t i = 0; same_shape && i < sizes.size(); i++) {
    same_shape = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i)) == sizes[i];
  }
  Py_DECREF(shape);
  if (PyErr_Occurred()) {
    Py_DECREF(array);
    return nullptr;
  }
  if (!same_shape) {
    Py_DECREF(array);
    Py_RETURN_NONE;
  }
  return array;
}

bool check_ready() {
  if (!g_boxes) {
    PyErr_SetString(PyExc_RuntimeError, "jaxdev native: set_boxes was not called");
    return false;
  }
  return true;
}

PyObject* plain_value(PyObject*, PyObject* obj) {
  if (!check_ready()) return nullptr;
  if (!THPVariable_Check(obj)) Py_RETURN_NONE;
  try {
    return plain_array(THPVariable_Unpack(obj));
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyObject* plain_values(PyObject*, PyObject* args) {
  if (!check_ready()) return nullptr;
  PyObject* seq = PySequence_Fast(args, "plain_values takes a sequence");
  if (!seq) return nullptr;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject* out = PyList_New(n);
  if (!out) {
    Py_DECREF(seq);
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* item = PySequence_Fast_GET_ITEM(seq, i);
    PyObject* value;
    if (THPVariable_Check(item)) {
      try {
        value = plain_array(THPVariable_Unpack(item));
      } catch (const std::exception& e) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
        value = nullptr;
      }
      if (value == Py_None) {
        Py_DECREF(value);
        Py_DECREF(out);
        Py_DECREF(seq);
        Py_RETURN_NONE;
      }
      if (!value) {
        Py_DECREF(out);
        Py_DECREF(seq);
        return nullptr;
      }
    } else {
      Py_INCREF(item);
      value = item;
    }
    PyList_SET_ITEM(out, i, value);
  }
  Py_DECREF(seq);
  return out;
}

// layout._plain: contiguous, and when a dim has size 0 or 1 (whose strides is_contiguous ignores)
// the strides are PyTorch's default ones.
bool is_plain(const at::Tensor& t) {
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (!impl->is_contiguous()) return false;
  auto sizes = impl->sizes();
  bool small = false;
  for (auto n : sizes) small = small || n <= 1;
  if (!small) return true;
  auto strides = impl->strides();
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (strides[i] != expected) return false;
    expected *= std::max<int64_t>(sizes[i], 1);
  }
  return true;
}

PyObject* all_plain(PyObject*, PyObject* args) {
  PyObject* seq = PySequence_Fast(args, "all_plain takes a sequence");
  if (!seq) return nullptr;
  bool plain = true;
  try {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; plain && i < n; i++) {
      PyObject* item = PySequence_Fast_GET_ITEM(seq, i);
      if (THPVariable_Check(item)) {
        plain = is_plain(THPVariable_Unpack(item));
      } else if (PyList_Check(item) || PyTuple_Check(item)) {
        Py_ssize_t m = PySequence_Fast_GET_SIZE(item);
        for (Py_ssize_t j = 0; plain && j < m; j++) {
          PyObject* x = PySequence_Fast_GET_ITEM(item, j);
          if (THPVariable_Check(x)) plain = is_plain(THPVariable_Unpack(x));
        }
      }
    }
  } catch (const std::exception& e) {
    Py_DECREF(seq);
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_DECREF(seq);
  return PyBool_FromLong(plain);
}

PyMethodDef methods[] = {
    {"register_cpu_kernels", register_cpu_kernels, METH_O, "PrivateUse1 kernels that redispatch to CPU"},
    {"new_tensor", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(new_tensor)), METH_FASTCALL,
     "a contiguous jax tensor on a new storage at a fake address"},
    {"set_boxes", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(set_boxes)), METH_FASTCALL,
     "the storage -> Box dictionary, and the Box class"},
    {"plain_value", plain_value, METH_O, "the array of a tensor that is its whole storage, else None"},
    {"plain_values", plain_values, METH_O, "plain_value of each tensor, or None"},
    {"all_plain", all_plain, METH_O, "every tensor contiguous with default strides"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_jaxdev_native", nullptr, -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__jaxdev_native() {
  s_logical = PyUnicode_InternFromString("logical");
  s_array = PyUnicode_InternFromString("_array");
  s_dtype = PyUnicode_InternFromString("dtype");
  s_shape = PyUnicode_InternFromString("shape");
  if (!s_logical || !s_array || !s_dtype || !s_shape) return nullptr;
  return PyModule_Create(&module_def);
}
