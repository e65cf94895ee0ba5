// Fused eager's replay guard (jaxdev/fused/replay.py): whether an op call's key in the recorder's trie
// would be a given child's key, decided by walking the call's arguments against that key part by part,
// without building the key. See native.cpp.
//
//   fused_match(seg, key, args, kwargs, lift, new_inputs, written_box[, guard])
//       key: the child's key as recorder.record built it: (op, context, parts..., [kwarg names]),
//       a part being (tuple|list, length), (scalar type, value) (a zero or NaN float or complex: its
//       bytes for the value, jaxdev/fused/number_keys.py), (Number,) for a float lifted to program
//       data, or (slot, (dtype, sizes, strides, offset)) for a tensor, slot ("i", k) being the k-th
//       input storage of the segment and ("p", node, m) a storage a recorded op made. lift: None, or
//       the positions and keyword names whose floats the recorder lifts (jaxdev/fused/numbers.py).
//       On a match it does what recording the call would have done to the segment `seg`: its new input
//       storages get their slots (seg.slots, seg.stored), the lifted floats go to seg.numbers, and the
//       tensors at `new_inputs` ((position, meta) pairs, the child's) become placeholders (seg.inputs,
//       seg.input_metas); it returns the call's tensor arguments, in order. None when anything
//       differs, or is unusual (a conj/neg bit, a copy-on-write or storage-less tensor, an inference
//       tensor outside inference mode): the full key then decides, as without this module. guard:
//       fused_guard(key) (fused_guard.cpp), the same key read once, which the walk then reads instead
//       of the key's tuples; the same answers.

#include "native.h"

#include <ATen/core/Tensor.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/COW.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstring>
#include <unordered_map>
#include <utility>
#include <vector>

namespace jaxdev_native {

namespace {

PyObject* s_slots = nullptr;
PyObject* s_stored = nullptr;
PyObject* s_numbers = nullptr;
PyObject* s_inputs = nullptr;
PyObject* s_input_metas = nullptr;

// One walk of a call's arguments against a key, read through `Key` (fused_guard.cpp: TupleKey, the key's
// tuple itself, or CompiledKey, the key read once). Every PyObject* it holds is borrowed from the call's arguments or the key, which outlive
// it, except the new slots' addresses (owned, released by ~Walk).
template <class Key>
struct Walk {
  Key key;
  PyObject* slots;
  PyObject* written_box;
  long long stored = 0;
  std::vector<PyObject*> tensors;
  std::vector<PyObject*> floats;
  std::vector<std::pair<PyObject*, long long>> new_slots;  // (address, k): storages first met in this call
  std::unordered_map<const void*, long long> new_slot_of;  // the same, by address

  ~Walk() {
    for (auto& s : new_slots) Py_DECREF(s.first);
  }
};

// -1: an error is set; 0: no match; 1: the slot part `expected` is the storage at `address`'s.
template <class Key>
int slot_matches(Walk<Key>& w, const void* address, PyObject* expected) {
  PyObject* key = PyLong_FromVoidPtr(const_cast<void*>(address));
  if (!key) return -1;
  PyObject* slot = PyDict_GetItemWithError(w.slots, key);  // borrowed
  if (slot) {
    Py_DECREF(key);
    return PyObject_RichCompareBool(slot, expected, Py_EQ);
  }
  if (PyErr_Occurred()) {
    Py_DECREF(key);
    return -1;
  }
  auto found = w.new_slot_of.find(address);
  long long k = found == w.new_slot_of.end() ? -1 : found->second;
  if (k < 0) {  // a storage new to the segment: an input, if jaxdev holds it as one box (Box or WrittenBox)
    PyObject* box = PyDict_GetItemWithError(g_boxes, key);
    if (!box || (Py_TYPE(box) != reinterpret_cast<PyTypeObject*>(g_box_type) && Py_TYPE(box) != reinterpret_cast<PyTypeObject*>(w.written_box))) {
      Py_DECREF(key);
      return PyErr_Occurred() ? -1 : 0;
    }
    k = w.stored + static_cast<long long>(w.new_slots.size());
    w.new_slots.emplace_back(key, k);  // owns key now
    w.new_slot_of.emplace(address, k);
  } else {
    Py_DECREF(key);
  }
  if (!PyTuple_CheckExact(expected) || PyTuple_GET_SIZE(expected) != 2) return 0;
  PyObject* kind = PyTuple_GET_ITEM(expected, 0);
  return PyUnicode_Check(kind) && PyUnicode_CompareWithASCIIString(kind, "i") == 0 &&
         long_is(PyTuple_GET_ITEM(expected, 1), k);
}

// -1: an error is set; 0: no match; 1: tensor `obj` is the key's next part.
template <class Key>
int tensor_matches(Walk<Key>& w, PyObject* obj) {
  const at::Tensor& t = THPVariable_Unpack(obj);
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (impl->is_conj() || impl->is_neg() || !impl->has_storage() || impl->is_nested() || impl->is_python_dispatch() ||
      impl->has_symbolic_sizes_strides() ||
      (impl->is_inference() && !c10::InferenceMode::is_enabled())) {
    return 0;
  }
  const c10::StorageImpl* storage = impl->unsafe_storage().unsafeGetStorageImpl();
  // A copy-on-write storage takes the full key: whether the op writes it, and must unshare it first,
  // is decided there (jaxdev/fused/cow.py).
  if (c10::impl::cow::is_cow_data_ptr(storage->data_ptr())) return 0;
  PyObject* expected = w.key.tensor_slot(impl);
  if (!expected) return PyErr_Occurred() ? -1 : 0;
  int slot = slot_matches(w, storage->data(), expected);
  if (slot == 1) w.tensors.push_back(obj);
  return slot;
}

template <class Key>
int walk(Walk<Key>& w, PyObject* a, bool lifted);

// Whether float or complex `a` is the value `expected` of its key part (jaxdev/fused/number_keys.py):
// bit for bit, not by == (0.0 == -0.0 and nan != nan would replay -0.0 as 0.0 and never a NaN). The
// key holds the value itself where == is its bits' (a nonzero, non-NaN number), else its bytes.
bool number_matches(PyObject* a, PyObject* expected) {
  double bits[2];
  size_t size = sizeof(double);
  if (PyFloat_CheckExact(a)) {
    bits[0] = PyFloat_AS_DOUBLE(a);
  } else {
    Py_complex c = PyComplex_AsCComplex(a);  // an exact complex: cannot fail
    bits[0] = c.real;
    bits[1] = c.imag;
    size *= 2;
  }
  if (PyBytes_CheckExact(expected)) {
    return static_cast<size_t>(PyBytes_GET_SIZE(expected)) == size && std::memcmp(bits, PyBytes_AS_STRING(expected), size) == 0;
  }
  double value[2];
  if (size == sizeof(double) && PyFloat_CheckExact(expected)) {
    value[0] = PyFloat_AS_DOUBLE(expected);
  } else if (size != sizeof(double) && PyComplex_CheckExact(expected)) {
    Py_complex c = PyComplex_AsCComplex(expected);
    value[0] = c.real;
    value[1] = c.imag;
  } else {
    return false;
  }
  return std::memcmp(bits, value, size) == 0;
}

// A float the recorder lifts (jaxdev/fused/numbers.py): within float16's range, where no kernel's
// check that it fits the result's dtype can fail; a larger one, NaN or inf stays in the key.
bool liftable(PyObject* a) {
  if (!PyFloat_CheckExact(a)) return false;
  double v = PyFloat_AS_DOUBLE(a);
  return v >= -65504.0 && v <= 65504.0;
}

// A float lifted to program data (numbers.lift): a liftable float, or a list/tuple of them only.
template <class Key>
int lifted_matches(Walk<Key>& w, PyObject* a) {
  if (liftable(a)) {
    if (!w.key.number()) return 0;
    w.floats.push_back(a);
    return 1;
  }
  bool seq = PyList_CheckExact(a) || PyTuple_CheckExact(a);
  Py_ssize_t n = seq ? PySequence_Fast_GET_SIZE(a) : 0;
  for (Py_ssize_t i = 0; seq && i < n; i++) seq = liftable(PySequence_Fast_GET_ITEM(a, i));
  if (!seq) return walk(w, a, false);
  if (!w.key.seq(reinterpret_cast<PyObject*>(Py_TYPE(a)), n)) return 0;
  for (Py_ssize_t i = 0; i < n; i++) {
    if (!w.key.number()) return 0;
    w.floats.push_back(PySequence_Fast_GET_ITEM(a, i));
  }
  return 1;
}

// -1: an error is set; 0: no match; 1: argument `a` gives the key's next parts (recorder.Segment.ref).
template <class Key>
int walk(Walk<Key>& w, PyObject* a, bool lifted) {
  if (lifted) return lifted_matches(w, a);
  if (THPVariable_Check(a)) return tensor_matches(w, a);
  if (PyList_CheckExact(a) || PyTuple_CheckExact(a)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(a);
    if (!w.key.seq(reinterpret_cast<PyObject*>(Py_TYPE(a)), n)) return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
      int r = walk(w, PySequence_Fast_GET_ITEM(a, i), false);
      if (r != 1) return r;
    }
    return 1;
  }
  // A scalar: the key holds (its exact type, its value), the type one of recorder._SCALARS, so the
  // comparison never runs a user's __eq__; a float or complex by its bits (number_matches).
  PyObject* expected = w.key.scalar(reinterpret_cast<PyObject*>(Py_TYPE(a)));
  if (!expected) return 0;
  if (PyFloat_CheckExact(a) || PyComplex_CheckExact(a)) return number_matches(a, expected);
  return PyObject_RichCompareBool(a, expected, Py_EQ);
}

bool contains(PyObject* positions, Py_ssize_t i) {
  for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(positions); j++) {
    if (long_is(PyTuple_GET_ITEM(positions, j), i)) return true;
  }
  return false;
}

// Whether keyword `name` is among the lifted positions and names (registry.DYNAMIC_NUMBERS).
bool names(PyObject* lifted, PyObject* name) {
  for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(lifted); j++) {
    PyObject* item = PyTuple_GET_ITEM(lifted, j);
    if (PyUnicode_CheckExact(item) && PyUnicode_Compare(item, name) == 0) return true;
  }
  return false;
}

// -1: an error is set; 0: no match; 1: the whole call gives `w.key` (recorder.record's key).
template <class Key>
int call_matches(Walk<Key>& w, PyObject* args, PyObject* kwargs, PyObject* lift) {
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  if (!w.key.seq(reinterpret_cast<PyObject*>(&PyTuple_Type), n)) return 0;  // the arguments' tuple
  for (Py_ssize_t i = 0; i < n; i++) {
    int r = walk(w, PyTuple_GET_ITEM(args, i), lift != Py_None && contains(lift, i));
    if (r != 1) return r;
  }
  Py_ssize_t nk = PyDict_GET_SIZE(kwargs);
  if (nk) {
    Py_ssize_t pos = 0;
    PyObject *name, *value;
    while (PyDict_Next(kwargs, &pos, &name, &value)) {
      int r = walk(w, value, lift != Py_None && PyUnicode_CheckExact(name) && names(lift, name));
      if (r != 1) return r;
    }
    PyObject* names = w.key.names();
    if (!names || !PyTuple_CheckExact(names) || PyTuple_GET_SIZE(names) != nk) return 0;
    pos = 0;
    for (Py_ssize_t i = 0; PyDict_Next(kwargs, &pos, &name, &value); i++) {
      int r = PyObject_RichCompareBool(name, PyTuple_GET_ITEM(names, i), Py_EQ);
      if (r != 1) return r;
    }
  }
  return w.key.done();
}

// Appends every item of `items` to the list attribute `name` of `seg`. False with an error set.
bool extend(PyObject* seg, PyObject* name, const std::vector<PyObject*>& items) {
  PyObject* list = PyObject_GetAttr(seg, name);
  bool ok = list && PyList_Check(list);
  for (size_t i = 0; ok && i < items.size(); i++) ok = PyList_Append(list, items[i]) == 0;
  if (list && !PyList_Check(list) && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "fused_match: not a list");
  Py_XDECREF(list);
  return ok;
}

// What recording the call does to the segment (see the top of this file). False with an error set.
template <class Key>
bool apply(Walk<Key>& w, PyObject* seg, PyObject* new_inputs) {
  for (auto& [address, k] : w.new_slots) {
    PyObject* slot = input_slot(k);
    bool ok = slot && PyDict_SetItem(w.slots, address, slot) == 0;
    Py_XDECREF(slot);
    if (!ok) return false;
  }
  if (!w.new_slots.empty()) {
    PyObject* stored = PyLong_FromLongLong(w.stored + static_cast<long long>(w.new_slots.size()));
    bool ok = stored && PyObject_SetAttr(seg, s_stored, stored) == 0;
    Py_XDECREF(stored);
    if (!ok) return false;
  }
  if (!w.floats.empty() && !extend(seg, s_numbers, w.floats)) return false;
  std::vector<PyObject*> inputs, metas;
  bool ok = true;
  for (Py_ssize_t i = 0; ok && i < PyTuple_GET_SIZE(new_inputs); i++) {
    PyObject* entry = PyTuple_GET_ITEM(new_inputs, i);  // (position, meta)
    Py_ssize_t position = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 0));
    if (position < 0 || position >= static_cast<Py_ssize_t>(w.tensors.size())) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "fused_match: a new input's position");
      ok = false;
      break;
    }
    PyObject* t = w.tensors[position];
    PyObject* storage = torch::createPyObject(THPVariable_Unpack(t).storage());
    PyObject* pair = storage ? PyTuple_Pack(2, storage, PyTuple_GET_ITEM(entry, 1)) : nullptr;
    Py_XDECREF(storage);
    ok = pair != nullptr;
    if (ok) {
      inputs.push_back(t);
      metas.push_back(pair);
    }
  }
  ok = ok && extend(seg, s_inputs, inputs) && extend(seg, s_input_metas, metas);
  for (PyObject* m : metas) Py_DECREF(m);
  return ok;
}

}  // namespace

// The slot tuples of seg.slots, ("i", k) and ("p", node, m), made once each and shared by every segment
// (new references). A segment holds one per storage, and making them anew at every step gave Python's
// cyclic GC a fifth of the objects it walked at each young collection of a training step. They are
// immutable and compared by value, so sharing them changes nothing else; there are as many as the
// largest segment's storages.
PyObject* input_slot(long long k) {
  static std::vector<PyObject*> made;
  if (k < 0) return Py_BuildValue("(sL)", "i", k);
  if (static_cast<size_t>(k) >= made.size()) made.resize(k + 1, nullptr);
  if (!made[k]) made[k] = Py_BuildValue("(sL)", "i", k);
  return Py_XNewRef(made[k]);
}

PyObject* made_slot(PyObject* p, Py_ssize_t node, PyObject* node_obj, Py_ssize_t m, PyObject* m_obj) {
  static std::vector<std::vector<PyObject*>> made;
  if (node < 0 || m < 0) return PyTuple_Pack(3, p, node_obj, m_obj);
  if (static_cast<size_t>(node) >= made.size()) made.resize(node + 1);
  std::vector<PyObject*>& of_node = made[node];
  if (static_cast<size_t>(m) >= of_node.size()) of_node.resize(m + 1, nullptr);
  if (!of_node[m]) of_node[m] = PyTuple_Pack(3, p, node_obj, m_obj);
  return Py_XNewRef(of_node[m]);
}

namespace {

// fused_match's walk through `key` (see fused_match); a new reference, or nullptr with an error set.
template <class Key>
PyObject* matched(Key key, PyObject* const* args) {
  PyObject* seg = args[0];
  Walk<Key> w{key};
  w.written_box = args[6];
  PyObject* slots = PyObject_GetAttr(seg, s_slots);
  PyObject* stored = slots ? PyObject_GetAttr(seg, s_stored) : nullptr;
  if (!stored || !PyDict_Check(slots)) {
    Py_XDECREF(slots);
    Py_XDECREF(stored);
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "fused_match: seg.slots is not a dict");
    return nullptr;
  }
  w.slots = slots;
  w.stored = PyLong_AsLongLong(stored);
  Py_DECREF(stored);
  int r = -1;
  try {
    r = PyErr_Occurred() ? -1 : call_matches(w, args[2], args[3], args[4]);
  } catch (const std::exception&) {  // a tensor without sizes or strides to read: the full key decides
    PyErr_Clear();
    r = 0;
  }
  PyObject* out = nullptr;
  if (r == 1 && apply(w, seg, args[5])) {
    out = PyList_New(static_cast<Py_ssize_t>(w.tensors.size()));
    for (size_t i = 0; out && i < w.tensors.size(); i++) {
      Py_INCREF(w.tensors[i]);
      PyList_SET_ITEM(out, i, w.tensors[i]);
    }
  } else if (r == 0) {
    out = Py_NewRef(Py_None);
  }
  Py_DECREF(slots);
  return out;
}

}  // namespace

PyObject* fused_match(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if ((nargs != 7 && nargs != 8) || !PyTuple_CheckExact(args[1]) || !PyTuple_CheckExact(args[2]) ||
      !PyDict_Check(args[3]) || !PyTuple_CheckExact(args[5])) {
    PyErr_SetString(PyExc_TypeError,
                    "fused_match(seg, key: tuple, args: tuple, kwargs: dict, lift, new_inputs: tuple, WrittenBox[, guard])");
    return nullptr;
  }
  const Guard* guard = nargs == 8 && args[7] != Py_None ? guard_of(args[7]) : nullptr;
  if (guard && guard->key != args[1]) guard = nullptr;  // another key's: walk the tuple
  if (!check_ready()) return nullptr;
  if (!s_slots) {
    s_slots = PyUnicode_InternFromString("slots");
    s_stored = PyUnicode_InternFromString("stored");
    s_numbers = PyUnicode_InternFromString("numbers");
    s_inputs = PyUnicode_InternFromString("inputs");
    s_input_metas = PyUnicode_InternFromString("input_metas");
    if (!s_slots || !s_stored || !s_numbers || !s_inputs || !s_input_metas) return nullptr;
  }
  PyObject* key = args[1];
  // key[0] is the op (the caller found the child by it); key[1] what kernels read besides their
  // arguments (fused_context.cpp): the same object while it did not change, else compared by value
  if (PyTuple_GET_SIZE(key) < 2) Py_RETURN_NONE;
  PyObject* context = current_context();
  if (!context) return nullptr;
  if (PyTuple_GET_ITEM(key, 1) != context) {
    int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(key, 1), context, Py_EQ);
    if (same < 0) return nullptr;
    if (!same) Py_RETURN_NONE;
  }
  return guard ? matched(CompiledKey{guard}, args) : matched(TupleKey{key}, args);
}

}  // namespace jaxdev_native
