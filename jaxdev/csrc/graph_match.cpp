// A compiled graph's call matched against one specialisation's input layout in one native pass
// (jaxdev/graphs/program.py's GraphProgram.run). See native.cpp.
//
//   graph_key(metas, statics, storages, shapes)  a specialisation's layout compiled once into C++ integers
//       (a capsule): `metas[i]` is argument i's (group, dtype, sizes, strides, offset, conj, neg), or None
//       for a Python argument whose value is `statics[i]`; `storages` each group's (numel, dtype);
//       `shapes` each group's array shape at the first call. None where a Python argument is of a type
//       graph_place leaves to Python (the key would not hold it).
//   graph_match(key, args)  (arrays, boxes, firsts, same) where `args` has the key's layout, else None:
//       the key Inputs(args).key would build (the same tensor layouts, storage groups, storages' sizes and
//       dtypes, Python arguments equal) with every tensor a plain jax tensor whose box is a plain Box
//       holding a physical array: `arrays` each group's array, `boxes` its box, `firsts` the first argument
//       on it, `same` whether every array has its shape in `shapes`. None sends the call to the Python path.
//
// Where the Python path took ~80 us for the LM's batch-1 forward (76 parameters: graph_place making a
// storage object per group and the placement tuple, a dictionary lookup hashing it, dynamo's tensor
// check, then each array's shape through its Python property), one pass compares C++ integers.

#include "native.h"

#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>
#include <memory>
#include <vector>

namespace jaxdev_native {

namespace {

constexpr const char* kGraphKey = "jaxdev.graph_key";

struct ArgKey {
  PyObject* value = nullptr;  // a Python argument's value (owned); nullptr for a tensor
  Py_ssize_t group = 0;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
  bool conj = false, neg = false;
};

struct GroupKey {
  int64_t numel = 0;
  PyObject* dtype = nullptr;  // the box's torch.dtype (owned; dtypes are singletons: compared by identity)
  PyObject* shape = nullptr;  // the array's shape at the first call (owned)
};

struct GraphKey {
  std::vector<ArgKey> args;
  std::vector<GroupKey> groups;
  ~GraphKey() {
    for (auto& a : args) Py_XDECREF(a.value);
    for (auto& g : groups) {
      Py_XDECREF(g.dtype);
      Py_XDECREF(g.shape);
    }
  }
};

void free_key(PyObject* capsule) {
  delete static_cast<GraphKey*>(PyCapsule_GetPointer(capsule, kGraphKey));
}

bool int_at(PyObject* tuple, Py_ssize_t i, int64_t& out) {
  out = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i));
  return !(out == -1 && PyErr_Occurred());
}

// One tensor argument's meta (group, dtype, sizes, strides, offset, conj, neg); false with an error set.
bool read_meta(PyObject* meta, ArgKey& k) {
  if (!PyTuple_Check(meta) || PyTuple_GET_SIZE(meta) != 7 || !THPDtype_Check(PyTuple_GET_ITEM(meta, 1))) {
    PyErr_SetString(PyExc_TypeError, "graph_key: a meta is (group, dtype, sizes, strides, offset, conj, neg)");
    return false;
  }
  int64_t group;
  if (!int_at(meta, 0, group) || !int_at(meta, 4, k.offset)) return false;
  k.group = static_cast<Py_ssize_t>(group);
  k.dtype = reinterpret_cast<THPDtype*>(PyTuple_GET_ITEM(meta, 1))->scalar_type;
  if (!read_ints(PyTuple_GET_ITEM(meta, 2), k.sizes) || !read_ints(PyTuple_GET_ITEM(meta, 3), k.strides)) return false;
  k.conj = PyObject_IsTrue(PyTuple_GET_ITEM(meta, 5)) == 1;
  k.neg = PyObject_IsTrue(PyTuple_GET_ITEM(meta, 6)) == 1;
  return true;
}

// The shape of a jax array (or tracer) through its aval, a C++ attribute, not the Python `shape`
// property; a new reference, or nullptr with an error set.
PyObject* array_shape(PyObject* array) {
  static PyObject* s_aval = PyUnicode_InternFromString("aval");
  PyObject* aval = s_aval ? PyObject_GetAttr(array, s_aval) : nullptr;
  if (!aval) {
    PyErr_Clear();
    return PyObject_GetAttr(array, s_shape);
  }
  PyObject* shape = PyObject_GetAttr(aval, s_shape);
  Py_DECREF(aval);
  return shape;
}

// -1: an error is set; 0: no match; 1: the arguments match the key's layouts, their storages' addresses
// in `addresses` and the first argument of each group in `firsts` (borrowed).
int match_args(const GraphKey& key, PyObject* list, std::vector<const void*>& addresses, std::vector<PyObject*>& firsts) {
  for (size_t i = 0; i < key.args.size(); i++) {
    PyObject* a = PyList_GET_ITEM(list, static_cast<Py_ssize_t>(i));
    const ArgKey& k = key.args[i];
    if (k.value) {
      if (!is_static(a)) return 0;
      int equal = PyObject_RichCompareBool(a, k.value, Py_EQ);
      if (equal != 1) return equal;
      continue;
    }
    if (!THPVariable_Check(a)) return 0;
    const c10::StorageImpl* storage = plain_storage(a);
    if (!storage) return 0;
    c10::TensorImpl* impl = THPVariable_Unpack(a).unsafeGetTensorImpl();
    if (impl->dtype().toScalarType() != k.dtype || impl->storage_offset() != k.offset || impl->is_conj() != k.conj ||
        impl->is_neg() != k.neg || impl->sizes() != c10::IntArrayRef(k.sizes) ||
        impl->strides() != c10::IntArrayRef(k.strides)) {
      return 0;
    }
    const void* address = storage->data();
    if (!addresses[k.group]) {
      addresses[k.group] = address;
      firsts[k.group] = a;
    } else if (addresses[k.group] != address) {
      return 0;
    }
  }
  // each group on its own storage (the key's groups are the distinct storages, in order of first use)
  std::vector<const void*> sorted(addresses);
  std::sort(sorted.begin(), sorted.end());
  bool distinct = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
  return distinct && (sorted.empty() || sorted.front() != nullptr) ? 1 : 0;
}

// -1: an error is set; 0: no match; 1: group g's plain box, holding a physical array of the key's
// storage size and dtype, and that array, put in `boxes` and `arrays`; `same` cleared where the array's
// shape is not the first call's. (graph_place's is_static, plain_storage and read_ints: graph_inputs.cpp,
// the same translation unit.)
int match_box(const GroupKey& k, const void* address, Py_ssize_t g, PyObject* boxes, PyObject* arrays, bool& same) {
  PyObject* key = PyLong_FromVoidPtr(const_cast<void*>(address));
  PyObject* box = key ? PyDict_GetItemWithError(g_boxes, key) : nullptr;  // borrowed
  Py_XDECREF(key);
  if (!box) return PyErr_Occurred() ? -1 : 0;
  if (Py_TYPE(box) != reinterpret_cast<PyTypeObject*>(g_box_type)) return 0;  // fused eager's pending box
  PyObject* numel = PyObject_GetAttr(box, s_numel);
  if (!numel) return -1;
  int64_t n = PyLong_AsLongLong(numel);
  Py_DECREF(numel);
  if (n == -1 && PyErr_Occurred()) return -1;
  PyObject* dtype = PyObject_GetAttr(box, s_dtype);
  if (!dtype) return -1;
  bool stored = n == k.numel && dtype == k.dtype;
  Py_DECREF(dtype);
  if (!stored) return 0;
  PyObject* logical = PyObject_GetAttr(box, s_logical);
  if (!logical) return -1;
  Py_DECREF(logical);
  if (logical != Py_None) return 0;  // Box.array transposes a logical value, in Python
  PyObject* array = PyObject_GetAttr(box, s_array);
  PyObject* shape = array ? array_shape(array) : nullptr;
  int equal = shape ? PyObject_RichCompareBool(shape, k.shape, Py_EQ) : -1;
  Py_XDECREF(shape);
  if (equal < 0) {
    Py_XDECREF(array);
    return -1;
  }
  same = same && equal == 1;
  PyList_SET_ITEM(arrays, g, array);
  PyList_SET_ITEM(boxes, g, Py_NewRef(box));
  return 1;
}

}  // namespace

PyObject* graph_key(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 || !PyList_Check(args[0]) || !PyList_Check(args[1]) || !PyList_Check(args[2]) ||
      !PyList_Check(args[3]) || PyList_GET_SIZE(args[0]) != PyList_GET_SIZE(args[1]) ||
      PyList_GET_SIZE(args[2]) != PyList_GET_SIZE(args[3])) {
    PyErr_SetString(PyExc_TypeError, "graph_key(metas, statics, storages, shapes: lists)");
    return nullptr;
  }
  auto key = std::make_unique<GraphKey>();
  key->args.resize(PyList_GET_SIZE(args[0]));
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(args[0]); i++) {
    PyObject* meta = PyList_GET_ITEM(args[0], i);
    ArgKey& k = key->args[i];
    if (meta == Py_None) {
      PyObject* value = PyList_GET_ITEM(args[1], i);
      if (!is_static(value)) Py_RETURN_NONE;
      k.value = Py_NewRef(value);
    } else if (!read_meta(meta, k)) {
      return nullptr;
    } else if (k.group < 0 || k.group >= PyList_GET_SIZE(args[2])) {
      PyErr_SetString(PyExc_ValueError, "graph_key: a meta's group is not one of the storages");
      return nullptr;
    }
  }
  key->groups.resize(PyList_GET_SIZE(args[2]));
  for (Py_ssize_t g = 0; g < PyList_GET_SIZE(args[2]); g++) {
    PyObject* stored = PyList_GET_ITEM(args[2], g);
    PyObject* shape = PyList_GET_ITEM(args[3], g);
    if (!PyTuple_Check(stored) || PyTuple_GET_SIZE(stored) != 2 || !PyTuple_Check(shape)) {
      PyErr_SetString(PyExc_TypeError, "graph_key: storages are (numel, dtype), shapes tuples");
      return nullptr;
    }
    GroupKey& k = key->groups[g];
    if (!int_at(stored, 0, k.numel)) return nullptr;
    k.dtype = Py_NewRef(PyTuple_GET_ITEM(stored, 1));
    k.shape = Py_NewRef(shape);
  }
  PyObject* capsule = PyCapsule_New(key.get(), kGraphKey, free_key);
  if (capsule) key.release();
  return capsule;
}

PyObject* graph_match(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyList_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "graph_match(key, args: list)");
    return nullptr;
  }
  auto* key = static_cast<GraphKey*>(PyCapsule_GetPointer(args[0], kGraphKey));
  if (!key || !check_ready() || !drop_dead_boxes()) return nullptr;
  if (static_cast<size_t>(PyList_GET_SIZE(args[1])) != key->args.size()) Py_RETURN_NONE;
  Py_ssize_t n = static_cast<Py_ssize_t>(key->groups.size());
  std::vector<const void*> addresses(n, nullptr);
  std::vector<PyObject*> firsts(n, nullptr);
  int r;
  try {
    r = match_args(*key, args[1], addresses, firsts);
  } catch (const std::exception&) {  // a tensor without a storage or sizes to read: Python decides
    PyErr_Clear();
    r = 0;
  }
  if (r != 1) return r == 0 ? Py_NewRef(Py_None) : nullptr;
  PyObject* arrays = PyList_New(n);
  PyObject* boxes = PyList_New(n);
  PyObject* first_list = PyList_New(n);
  bool same = true;
  for (Py_ssize_t g = 0; r == 1 && arrays && boxes && first_list && g < n; g++) {
    r = match_box(key->groups[g], addresses[g], g, boxes, arrays, same);
    PyList_SET_ITEM(first_list, g, Py_NewRef(firsts[g]));
  }
  PyObject* out = nullptr;
  if (r == 1 && arrays && boxes && first_list) {
    out = PyTuple_Pack(4, arrays, boxes, first_list, same ? Py_True : Py_False);
  } else if (r == 0) {
    out = Py_NewRef(Py_None);
  }
  Py_XDECREF(arrays);  // a list's unset items are NULL: freed as empty
  Py_XDECREF(boxes);
  Py_XDECREF(first_list);
  return out;
}

}  // namespace jaxdev_native
