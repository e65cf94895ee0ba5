// A compiled graph's call, its per-argument loops without a Python frame (jaxdev/graphs/inputs.py's
// Inputs, jaxdev/graphs/program.py's Specialisation.run). See native.cpp.
//
//   graph_place(args, static)  Inputs.__init__'s placement of a call's arguments, when every tensor is
//       a plain jax tensor with its box in BOXES and every other argument an int, float, bool, str or
//       None: (placed, tensors, storages, boxes), as the Python loop builds them (`static` the marker it
//       puts before a Python argument). None otherwise (a CPU tensor, a copy-on-write storage, a tensor
//       subclass with Python dispatch, symbolic sizes, another Python type): Python decides. Measured on
//       benchmarks/compiled_host.py's train step (627 arguments over three calls): ~0.8 ms in Python.
//   graph_arrays(boxes, shapes[, candidates, exported, tracer])  Specialisation.run's input arrays:
//       (arrays, same), `arrays` each box's physical array, `same` whether each has the shape in `shapes`;
//       None where a box holds a logical value (Box.array transposes it, in Python) or is a subclass of Box
//       (its own `array`). With `candidates` (a tuple of indices into boxes), a fused flush's call
//       (jaxdev/fused/program.py): (arrays, same, donated), `donated` the candidates whose box is its
//       array's sole holder, tested before `arrays` holds them (tensor.sole_holders: no other reference,
//       not in `exported` (boxes.EXPORTED), not a `tracer`); its caller asks only where no storage is sharded.
//   graph_view(storage, dtype, sizes, strides, offset)  a new jax tensor on `storage` (a jax storage) with
//       that layout and its own version counter: boxes.tensor_on_storage without its empty tensor and
//       set_ (2.5 us of the ~70 outputs of a compiled train step's graphs that are views); None where the
//       storage is not a jax one.

#include "native.h"

#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/COW.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Storage.h>
#include <torch/csrc/autograd/python_variable.h>

#include <unordered_map>

namespace jaxdev_native {

namespace {

bool is_static(PyObject* a) {
  return a == Py_None || PyLong_CheckExact(a) || PyFloat_CheckExact(a) || PyBool_Check(a) || PyUnicode_CheckExact(a);
}

// Appends the pair (a, b), stealing neither; false with an error set.
bool append_two(PyObject* list, PyObject* a, PyObject* b) {
  return a && b && PyList_Append(list, a) == 0 && PyList_Append(list, b) == 0;
}

// The storage of a plain jax tensor (not copy-on-write: Python's data_ptr() would materialize it), or
// nullptr where Python must decide.
const c10::StorageImpl* plain_storage(PyObject* t) {
  c10::TensorImpl* impl = THPVariable_Unpack(t).unsafeGetTensorImpl();
  if (!impl->has_storage() || impl->is_nested() || impl->is_python_dispatch() || impl->has_symbolic_sizes_strides()) {
    return nullptr;
  }
  const c10::StorageImpl* storage = impl->unsafe_storage().unsafeGetStorageImpl();
  if (c10::impl::cow::is_cow_data_ptr(storage->data_ptr())) return nullptr;
  return storage;
}

struct Place {
  PyObject* placed = PyList_New(0);
  PyObject* tensors = PyList_New(0);
  PyObject* storages = PyList_New(0);
  PyObject* boxes = PyList_New(0);
  PyObject* stored = PyList_New(0);
  std::unordered_map<const void*, Py_ssize_t> group;
  ~Place() {
    Py_XDECREF(placed);
    Py_XDECREF(tensors);
    Py_XDECREF(storages);
    Py_XDECREF(boxes);
    Py_XDECREF(stored);
  }
  bool made() const { return placed && tensors && storages && boxes && stored; }
};

// -1: an error is set; 0: Python decides; 1: tensor `t` placed.
int place_tensor(Place& p, PyObject* t) {
  const c10::StorageImpl* storage = plain_storage(t);
  if (!storage) return 0;
  const void* address = storage->data();
  auto found = p.group.find(address);
  Py_ssize_t g;
  if (found == p.group.end()) {
    PyObject* key = PyLong_FromVoidPtr(const_cast<void*>(address));
    PyObject* box = key ? PyDict_GetItemWithError(g_boxes, key) : nullptr;  // borrowed
    Py_XDECREF(key);
    if (!box) return PyErr_Occurred() ? -1 : 0;  // not a jax storage (a CPU input): Python
    PyObject* numel = PyObject_GetAttr(box, s_numel);
    PyObject* dtype = numel ? PyObject_GetAttr(box, s_dtype) : nullptr;
    PyObject* py_storage = dtype ? torch::createPyObject(THPVariable_Unpack(t).storage()) : nullptr;
    bool ok = py_storage && PyList_Append(p.stored, numel) == 0 && PyList_Append(p.stored, dtype) == 0 &&
              PyList_Append(p.stored, Py_False) == 0 && PyList_Append(p.boxes, box) == 0 &&
              PyList_Append(p.storages, py_storage) == 0;
    Py_XDECREF(numel);
    Py_XDECREF(dtype);
    Py_XDECREF(py_storage);
    if (!ok) return -1;
    g = static_cast<Py_ssize_t>(p.group.size());
    p.group.emplace(address, g);
  } else {
    g = found->second;
  }
  PyObject* index = PyLong_FromSsize_t(g);
  PyObject* offset = PyLong_FromLongLong(THPVariable_Unpack(t).unsafeGetTensorImpl()->storage_offset());
  bool ok = append_two(p.placed, index, offset) && PyList_Append(p.tensors, t) == 0;
  Py_XDECREF(index);
  Py_XDECREF(offset);
  return ok ? 1 : -1;
}

// The ints of a tuple (torch.Size included); false with an error set where one is not an int.
bool read_ints(PyObject* tuple, std::vector<int64_t>& out) {
  if (!PyTuple_Check(tuple)) {
    PyErr_SetString(PyExc_TypeError, "graph_view: sizes and strides are tuples");
    return false;
  }
  out.resize(PyTuple_GET_SIZE(tuple));
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); i++) {
    out[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i));
    if (out[i] == -1 && PyErr_Occurred()) return false;
  }
  return true;
}

}  // namespace

PyObject* graph_view(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 5 || !THPStorage_Check(args[0]) || !THPDtype_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "graph_view(storage, dtype, sizes, strides, offset)");
    return nullptr;
  }
  std::vector<int64_t> sizes, strides;
  if (!read_ints(args[2], sizes) || !read_ints(args[3], strides)) return nullptr;
  int64_t offset = PyLong_AsLongLong(args[4]);
  if (offset == -1 && PyErr_Occurred()) return nullptr;
  if (sizes.size() != strides.size()) {
    PyErr_SetString(PyExc_ValueError, "graph_view: as many strides as sizes");
    return nullptr;
  }
  try {
    const c10::Storage& storage = THPStorage_Unpack(args[0]);
    if (storage.device_type() != c10::DeviceType::PrivateUse1) Py_RETURN_NONE;
    auto meta = c10::scalarTypeToTypeMeta(reinterpret_cast<THPDtype*>(args[1])->scalar_type);
    // As create_empty_tensor makes a jax tensor: TensorImpl adds the backend's autograd keys itself.
    auto t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), meta);
    t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides, offset);
    return THPVariable_Wrap(std::move(t));
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyObject* graph_place(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyList_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "graph_place(args: list, static)");
    return nullptr;
  }
  if (!check_ready() || !drop_dead_boxes()) return nullptr;
  Place p;
  if (!p.made()) return nullptr;
  int r = 1;
  try {
    for (Py_ssize_t i = 0; r == 1 && i < PyList_GET_SIZE(args[0]); i++) {
      PyObject* a = PyList_GET_ITEM(args[0], i);
      if (THPVariable_Check(a)) {
        r = place_tensor(p, a);
      } else if (is_static(a)) {
        r = PyList_Append(p.placed, args[1]) == 0 && PyList_Append(p.placed, a) == 0 ? 1 : -1;
      } else {
        r = 0;
      }
    }
  } catch (const std::exception&) {  // a tensor without a storage or sizes to read: Python decides
    PyErr_Clear();
    r = 0;
  }
  if (r != 1) return r == 0 ? Py_NewRef(Py_None) : nullptr;
  if (PyList_SetSlice(p.placed, PY_SSIZE_T_MAX, PY_SSIZE_T_MAX, p.stored) != 0) return nullptr;
  PyObject* placed = PyList_AsTuple(p.placed);
  PyObject* out = placed ? PyTuple_Pack(4, placed, p.tensors, p.storages, p.boxes) : nullptr;
  Py_XDECREF(placed);
  return out;
}

namespace {

// tensor.sole_holders' test of a plain box's physical array, read from its slot with no reference taken.
bool held_by_box_alone(PyObject* array, PyObject* exported, PyObject* tracer) {
  if (Py_REFCNT(array) != 1 || PyObject_TypeCheck(array, reinterpret_cast<PyTypeObject*>(tracer))) return false;
  if (PyDict_GET_SIZE(exported) == 0) return true;
  PyObject* id = PyLong_FromVoidPtr(array);
  PyObject* ref = id ? PyDict_GetItemWithError(exported, id) : nullptr;  // borrowed
  Py_XDECREF(id);
  if (PyErr_Occurred()) PyErr_Clear();
  return !ref || !PyWeakref_Check(ref) || PyWeakref_GetObject(ref) != array;
}

// The candidates held by their boxes alone (see graph_arrays), or nullptr: an error set, or None to
// return (a candidate that is not a plain box with a physical array: Python decides).
PyObject* donatable(PyObject* boxes, PyObject* candidates, PyObject* exported, PyObject* tracer) {
  Py_ssize_t n = PyList_GET_SIZE(boxes);
  PyObject* out = PyList_New(0);
  for (Py_ssize_t j = 0; out && j < PyTuple_GET_SIZE(candidates); j++) {
    PyObject* index = PyTuple_GET_ITEM(candidates, j);
    Py_ssize_t g = PyLong_AsSsize_t(index);
    if (g < 0 || g >= n) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "graph_arrays: a candidate out of range");
      Py_CLEAR(out);
      break;
    }
    PyObject* box = PyList_GET_ITEM(boxes, g);
    if (Py_TYPE(box) != reinterpret_cast<PyTypeObject*>(g_box_type) || slot_of(box, g_slots.logical) != Py_None) {
      Py_DECREF(out);
      return Py_NewRef(Py_None);
    }
    if (held_by_box_alone(slot_of(box, g_slots.array), exported, tracer) && PyList_Append(out, index) < 0) {
      Py_CLEAR(out);
    }
  }
  if (!out) return nullptr;
  PyObject* donated = PyList_AsTuple(out);
  Py_DECREF(out);
  return donated;
}

}  // namespace

PyObject* graph_arrays(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if ((nargs != 2 && nargs != 5) || !PyList_Check(args[0]) || !PyList_Check(args[1]) ||
      PyList_GET_SIZE(args[0]) != PyList_GET_SIZE(args[1]) ||
      (nargs == 5 && (!PyTuple_CheckExact(args[2]) || !PyDict_Check(args[3]) || !PyType_Check(args[4])))) {
    PyErr_SetString(PyExc_TypeError,
                    "graph_arrays(boxes: list, shapes: list of the same length[, candidates: tuple, exported: dict, "
                    "tracer: type])");
    return nullptr;
  }
  PyObject* donated = nargs == 5 ? donatable(args[0], args[2], args[3], args[4]) : nullptr;
  if (nargs == 5 && (!donated || donated == Py_None)) return donated;
  Py_ssize_t n = PyList_GET_SIZE(args[0]);
  PyObject* arrays = PyList_New(n);
  bool same = true;
  for (Py_ssize_t i = 0; arrays && i < n; i++) {
    PyObject* box = PyList_GET_ITEM(args[0], i);
    if (Py_TYPE(box) != reinterpret_cast<PyTypeObject*>(g_box_type)) {  // a subclass (fused eager's pending
      Py_DECREF(arrays);                                                 // box) reads its array its own way
      Py_XDECREF(donated);
      Py_RETURN_NONE;
    }
    PyObject* logical = slot_of(box, g_slots.logical);
    PyObject* array = logical == Py_None ? Py_XNewRef(slot_of(box, g_slots.array)) : nullptr;
    PyObject* shape = array ? PyObject_GetAttr(array, s_shape) : nullptr;
    int equal = shape ? PyObject_RichCompareBool(shape, PyList_GET_ITEM(args[1], i), Py_EQ) : -1;
    Py_XDECREF(shape);
    if (equal < 0) {
      Py_XDECREF(array);
      Py_CLEAR(arrays);
      Py_XDECREF(donated);
      if (logical != Py_None && !PyErr_Occurred()) return Py_NewRef(Py_None);  // a logical value: Box.array transposes it
      return nullptr;
    }
    same = same && equal == 1;
    PyList_SET_ITEM(arrays, i, array);
  }
  if (!arrays) {
    Py_XDECREF(donated);
    return nullptr;
  }
  PyObject* out = donated ? PyTuple_Pack(3, arrays, same ? Py_True : Py_False, donated)
                          : PyTuple_Pack(2, arrays, same ? Py_True : Py_False);
  Py_DECREF(arrays);
  Py_XDECREF(donated);
  return out;
}

}  // namespace jaxdev_native
