// Per-op eager's commonest kernels replayed without a Python frame (issue 37 item 4).
//
// register_memo_kernel(name, slow) makes aten::`name`'s PrivateUse1 kernel a C++ one that keys each
// call by everything its Python kernel reads: every argument (a tensor by its dtype, sizes, strides,
// offset, conj/neg bits and its storage's Box: dtype, numel and its array's shape; a number by its type
// and bits; a string, an int list, a tensor list) and what kernels read besides their arguments
// (fused_context.cpp: default dtype, deterministic algorithms, threads, matmul precision, warn-always).
// A key met before replays what the Python kernel did for it: one jitted program called on the
// arguments' stored arrays (and constants: the view offsets, numbers the kernel passed), its outputs
// made into the op's results with the layouts it gave them. That is the kernel's whole effect for ops
// whose kernels compute from shapes, dtypes and numbers alone (jaxdev/ops/kit/memo.py names them and
// learns each key: exactly one program, fed from the arguments' arrays, its outputs the results).
//
// A key not met yet runs `slow` (jaxdev_slow::`name`, the Python kernel) inside a frame that
// memo_begin/memo_learn fill from Python; so does any call the keys cannot say (another device's
// tensor, a box holding a logical value or a tracer, a storage placed over a mesh, an argument type
// not listed above), and a replay whose program raises (the Python kernel then raises as it would).

#include "native.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/TensorImpl.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/library.h>

#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace jaxdev_native {

namespace {

// What a replay passes for one program argument: the stored array of the op's `arg`-th tensor
// (arguments and tensor lists flattened), or `constant` (owned) where arg < 0.
struct Feed {
  int arg;
  PyObject* constant;
};

// What a replay gives for one of the op's returns: output `index` of the program as a new contiguous
// tensor of `dtype` ('w'), or laid out as wrap_strided lays it out ('s', wrap_laid_out); `constant` (an
// array made once, such as attention's placeholders) as a new tensor ('c'); None ('n'); an int ('i');
// the very tensor of an earlier result ('r', `index` counting tensor and None results only).
struct Give {
  char kind;
  int index;
  PyObject* value;  // 'w', 'c': the torch.dtype; 's': (dtype, shape, strides, perm); 'i': the int (owned)
  PyObject* array;  // 'c': the constant array (owned)
};

struct Entry {
  PyObject* program;  // owned
  PyObject* context;  // owned: the context object keyed (its address is in the key)
  bool several;       // the program returns a tuple of outputs
  std::vector<Feed> feeds;
  std::vector<Give> gives;
};

struct MemoOp {
  c10::OperatorHandle slow;
  std::unordered_map<std::string, Entry*> entries;
};

// A call being learned: pushed by the kernel around its slow path, filled by memo_learn.
struct Frame {
  int op;
  std::string key;
  std::vector<PyObject*> arrays;  // owned: the tensor arguments' stored arrays, as keyed
  bool taken = false;
  Entry* learned = nullptr;
};

std::vector<MemoOp*> g_memo_ops;
thread_local std::vector<Frame>* t_frames = nullptr;
PyObject* g_array_type = nullptr;    // jax's concrete array class: a tracer is never keyed
PyObject* g_memo_sharded = nullptr;  // tensor.SHARDED_ENTRIES: any entry sends every call to Python
constexpr size_t kMaxEntries = 4096;  // per op; past it the op's entries start over

void free_entry(Entry* e) {
  Py_XDECREF(e->program);
  Py_XDECREF(e->context);
  for (auto& f : e->feeds) Py_XDECREF(f.constant);
  for (auto& g : e->gives) {
    Py_XDECREF(g.value);
    Py_XDECREF(g.array);
  }
  delete e;
}

template <typename T>
void put(std::string& key, const T& v) {
  key.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

// Whether the box's logical value (array, shape, strides, perm) is `impl` as it is laid out: the
// array read gives then, with no program (strided.read: a result PyTorch lays out permuted, such as
// attention's, met by its backward).
bool logical_is(const c10::TensorImpl* impl, PyObject* logical) {
  if (!PyTuple_Check(logical) || PyTuple_GET_SIZE(logical) != 4 || impl->storage_offset() != 0) return false;
  PyObject* shape = PyTuple_GET_ITEM(logical, 1);
  PyObject* strides = PyTuple_GET_ITEM(logical, 2);
  auto sizes = impl->sizes();
  auto steps = impl->strides();
  Py_ssize_t n = static_cast<Py_ssize_t>(sizes.size());
  if (!PyTuple_Check(shape) || !PyTuple_Check(strides) || PyTuple_GET_SIZE(shape) != n || PyTuple_GET_SIZE(strides) != n)
    return false;
  for (Py_ssize_t i = 0; i < n; i++) {
    if (PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i)) != sizes[i]) return false;
    if (PyLong_AsLongLong(PyTuple_GET_ITEM(strides, i)) != steps[i]) return false;
  }
  return !PyErr_Occurred();
}

// The array a kernel reads for `impl` from its storage's Box (a new reference), its part of the key
// appended: the box's dtype and numel, and its array's shape ('p', a physical array) or the layout
// matching its logical value ('g'). nullptr (no error left) where it cannot be keyed: no plain Box, a
// logical value laid out otherwise, an array that is not a concrete jax array (a tracer).
PyObject* stored_array(const c10::TensorImpl* impl, std::string& key) {
  PyObject* address = PyLong_FromVoidPtr(const_cast<void*>(impl->unsafe_storage().unsafeGetStorageImpl()->data()));
  PyObject* box = address ? PyDict_GetItemWithError(g_boxes, address) : nullptr;  // borrowed
  Py_XDECREF(address);
  if (!box || Py_TYPE(box) != reinterpret_cast<PyTypeObject*>(g_box_type)) return nullptr;
  PyObject* logical = PyObject_GetAttr(box, s_logical);
  PyObject* array = nullptr;
  if (logical == Py_None) {
    array = PyObject_GetAttr(box, s_array);
    key.push_back('p');
  } else if (logical && logical_is(impl, logical)) {
    array = Py_NewRef(PyTuple_GET_ITEM(logical, 0));
    key.push_back('g');
  }
  Py_XDECREF(logical);
  PyObject* dtype = array ? PyObject_GetAttr(box, s_dtype) : nullptr;
  PyObject* numel = dtype ? PyObject_GetAttr(box, s_numel) : nullptr;
  PyObject* shape = nullptr;
  bool ok = numel && reinterpret_cast<PyObject*>(Py_TYPE(array)) == g_array_type && THPDtype_Check(dtype);
  if (ok) shape = PyObject_GetAttr(array, s_shape);
  ok = ok && shape && PyTuple_Check(shape);
  if (ok) {
    put(key, static_cast<int8_t>(reinterpret_cast<THPDtype*>(dtype)->scalar_type));
    put(key, PyLong_AsLongLong(numel));
    put(key, static_cast<int32_t>(PyTuple_GET_SIZE(shape)));
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shape); i++) put(key, PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i)));
    ok = !PyErr_Occurred();
  }
  Py_XDECREF(shape);
  Py_XDECREF(numel);
  Py_XDECREF(dtype);
  if (!ok) {
    Py_XDECREF(array);
    PyErr_Clear();
    return nullptr;
  }
  return array;
}

// A tensor argument into the key, its stored array kept in `arrays`; false where it cannot be keyed.
bool key_tensor(const at::Tensor& t, std::string& key, std::vector<PyObject*>& arrays) {
  if (!t.defined()) {
    key.push_back('u');
    return true;
  }
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (impl->device_type() != c10::DeviceType::PrivateUse1 || !impl->has_storage()) return false;
  key.push_back('t');
  put(key, static_cast<int8_t>(impl->dtype().toScalarType()));
  put(key, static_cast<int8_t>((impl->is_conj() ? 1 : 0) | (impl->is_neg() ? 2 : 0)));
  auto sizes = impl->sizes();
  auto strides = impl->strides();
  put(key, static_cast<int32_t>(sizes.size()));
  for (size_t i = 0; i < sizes.size(); i++) {
    put(key, sizes[i]);
    put(key, strides[i]);
  }
  put(key, impl->storage_offset());
  PyObject* array = stored_array(impl, key);
  if (!array) return false;
  // Which earlier argument holds the very same array (a fused qkv's q, k and v; a clone's storage), if
  // one does: a program fed from either is fed the same, and the key says so.
  int16_t same = -1;
  for (size_t i = 0; i < arrays.size() && same < 0; i++) {
    if (arrays[i] == array) same = static_cast<int16_t>(i);
  }
  put(key, same);
  arrays.push_back(array);  // owned by the caller
  return true;
}

// The call's key (context first, then every argument); false where some part cannot be keyed.
bool key_call(torch::jit::Stack* stack, size_t nargs, PyObject* context, std::string& key,
              std::vector<PyObject*>& arrays) {
  put(key, reinterpret_cast<uintptr_t>(context));
  for (const c10::IValue& v : torch::jit::last(*stack, nargs)) {
    if (v.isTensor()) {
      if (!key_tensor(v.toTensor(), key, arrays)) return false;
    } else if (v.isNone()) {
      key.push_back('n');
    } else if (v.isBool()) {
      key.push_back(v.toBool() ? 'T' : 'F');
    } else if (v.isInt()) {
      key.push_back('i');
      put(key, v.toInt());
    } else if (v.isDouble()) {
      key.push_back('d');
      put(key, v.toDouble());  // its bits: 0.0 and -0.0, every NaN, apart
    } else if (v.isString()) {
      const std::string& s = v.toStringRef();
      key.push_back('s');
      put(key, static_cast<uint32_t>(s.size()));
      key.append(s);
    } else if (v.isIntList()) {
      auto list = v.toIntList();
      key.push_back('l');
      put(key, static_cast<uint32_t>(list.size()));
      for (int64_t x : list) put(key, x);
    } else if (v.isBoolList()) {
      auto list = v.toBoolList();
      key.push_back('B');
      put(key, static_cast<uint32_t>(list.size()));
      for (bool x : list) key.push_back(x ? 1 : 0);
    } else if (v.isTensorList()) {
      auto list = v.toTensorList();
      key.push_back('L');
      put(key, static_cast<uint32_t>(list.size()));
      for (const at::Tensor& t : list) {
        if (!key_tensor(t, key, arrays)) return false;
      }
    } else {
      return false;
    }
  }
  return true;
}

void release(std::vector<PyObject*>& arrays) {
  for (PyObject* a : arrays) Py_DECREF(a);
  arrays.clear();
}

// A new tensor holding `array` laid out as `laid` = (dtype, shape, strides, perm) says, as
// tensor.wrap_strided makes it for a dense permutation (a logical value: its Box holds `array` as
// (array, shape, strides, perm) and no physical array until the storage is read another way), in C++:
// wrap_strided's Python cost 15 us a result (attention's output and logsumexp). Undefined on failure.
at::Tensor wrap_laid_out(PyObject* array, PyObject* laid) {
  if (!PyTuple_Check(laid) || PyTuple_GET_SIZE(laid) != 4) return {};
  PyObject* shape = PyTuple_GET_ITEM(laid, 1);
  PyObject* strides = PyTuple_GET_ITEM(laid, 2);
  std::vector<int64_t> steps;
  if (!PyTuple_Check(strides)) return {};
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(strides); i++) steps.push_back(PyLong_AsLongLong(PyTuple_GET_ITEM(strides, i)));
  if (PyErr_Occurred()) return {};
  at::Tensor t = wrap_result(Py_NewRef(array), PyTuple_GET_ITEM(laid, 0));  // contiguous, its Box physical
  if (!t.defined()) return {};
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (static_cast<size_t>(impl->dim()) != steps.size()) return {};
  impl->set_sizes_and_strides(impl->sizes(), steps);
  PyObject* address = PyLong_FromVoidPtr(const_cast<void*>(impl->unsafe_storage().unsafeGetStorageImpl()->data()));
  PyObject* box = address ? PyDict_GetItemWithError(g_boxes, address) : nullptr;  // borrowed
  Py_XDECREF(address);
  PyObject* logical = box ? PyTuple_Pack(4, array, shape, strides, PyTuple_GET_ITEM(laid, 3)) : nullptr;
  if (!logical) return {};
  set_slot(box, g_slots.logical, logical);  // steals
  set_slot(box, g_slots.array, Py_NewRef(Py_None));
  return t;
}

// The op's results from `entry` pushed in place of its arguments; false (nothing pushed, no error
// left) where the replay must leave the op to the slow path.
bool replay(const Entry& entry, const std::vector<PyObject*>& arrays, size_t nargs, torch::jit::Stack* stack) {
  std::vector<PyObject*> values(entry.feeds.size());
  for (size_t i = 0; i < entry.feeds.size(); i++) {
    const Feed& f = entry.feeds[i];
    if (f.arg >= static_cast<int>(arrays.size())) return false;
    values[i] = f.arg < 0 ? f.constant : arrays[f.arg];
  }
  PyObject* out = PyObject_Vectorcall(entry.program, values.data(), values.size(), nullptr);
  if (!out) return false;
  if (entry.several && !PyTuple_Check(out) && !PyList_Check(out)) {
    Py_DECREF(out);
    return false;
  }
  std::vector<at::Tensor> results;
  bool ok = true;
  for (const Give& g : entry.gives) {
    if (g.kind == 'n') {
      results.emplace_back();
      continue;
    }
    if (g.kind == 'i') {
      continue;  // pushed below, in order
    }
    if (g.kind == 'r') {  // the same tensor as an earlier result (attention's placeholders)
      if (g.index < 0 || static_cast<size_t>(g.index) >= results.size()) {
        ok = false;
        break;
      }
      results.push_back(results[g.index]);
      continue;
    }
    PyObject* part = g.kind == 'c' ? g.array : (entry.several ? PySequence_GetItem(out, g.index) : out);
    if (!part) {
      ok = false;
      break;
    }
    if (entry.several && g.kind != 'c') {
      Py_DECREF(part);  // the tuple keeps it
    }
    if (g.kind == 's') {
      results.push_back(wrap_laid_out(part, g.value));
      ok = results.back().defined();
    } else {
      Py_INCREF(part);
      results.push_back(wrap_result(part, g.value));  // steals part
      ok = results.back().defined();
    }
    if (!ok) break;
  }
  Py_DECREF(out);
  if (!ok) {
    PyErr_Clear();
    return false;
  }
  torch::jit::drop(*stack, nargs);
  size_t r = 0;
  for (const Give& g : entry.gives) {
    if (g.kind == 'i') {
      torch::jit::push(*stack, static_cast<int64_t>(PyLong_AsLongLong(g.value)));
    } else {
      torch::jit::push(*stack, std::move(results[r++]));
    }
  }
  return true;
}

void memo_kernel(const c10::OperatorHandle& handle, c10::DispatchKeySet, torch::jit::Stack* stack);

}  // namespace

std::unordered_map<const void*, int>* g_memo_index = new std::unordered_map<const void*, int>;

namespace {

// Pops the frame pushed for the slow path; a frame that learned (and whose call returned) enters its
// entry under its key. Runs with the GIL.
void pop_frame(MemoOp& op, bool returned) {
  Frame& f = t_frames->back();
  release(f.arrays);
  if (f.learned) {
    if (returned) {
      if (op.entries.size() >= kMaxEntries) {
        for (auto& kv : op.entries) free_entry(kv.second);
        op.entries.clear();
      }
      auto found = op.entries.find(f.key);
      if (found != op.entries.end()) free_entry(found->second);
      op.entries[f.key] = f.learned;
    } else {
      free_entry(f.learned);
    }
  }
  t_frames->pop_back();
}

void memo_kernel(const c10::OperatorHandle& handle, c10::DispatchKeySet, torch::jit::Stack* stack) {
  int index = g_memo_index->at(&handle.schema());
  MemoOp& op = *g_memo_ops[index];
  size_t nargs = handle.schema().arguments().size();
  if (g_python_kernels) {
    op.slow.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
    return;
  }
  bool framed = false;
  {
    PyGILState_STATE gil = PyGILState_Ensure();
    std::string key;
    std::vector<PyObject*> arrays;
    bool keyed = false, done = false;
    try {
      PyObject* context = current_context();  // borrowed
      keyed = context && PyDict_GET_SIZE(g_memo_sharded) == 0 && drop_dead_boxes() &&
              key_call(stack, nargs, context, key, arrays);
      if (keyed) {
        auto found = op.entries.find(key);
        done = found != op.entries.end() && found->second->context == context &&
               replay(*found->second, arrays, nargs, stack);
      }
    } catch (const std::exception&) {
      keyed = done = false;  // the slow path meets the same condition and reports it
    }
    PyErr_Clear();
    if (keyed && !done) {
      if (!t_frames) t_frames = new std::vector<Frame>;
      t_frames->push_back(Frame{index, std::move(key), std::move(arrays)});
      framed = true;
    } else {
      release(arrays);
    }
    PyGILState_Release(gil);
    if (done) return;
  }
  try {
    op.slow.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
  } catch (...) {
    if (framed) {
      PyGILState_STATE gil = PyGILState_Ensure();
      pop_frame(op, false);
      PyGILState_Release(gil);
    }
    throw;
  }
  if (framed) {
    PyGILState_STATE gil = PyGILState_Ensure();
    pop_frame(op, true);
    PyGILState_Release(gil);
  }
}

}  // namespace

}  // namespace jaxdev_native
