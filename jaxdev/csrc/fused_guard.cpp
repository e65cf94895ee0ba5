// The two ways fused eager's replay guard (fused.cpp's walk; jaxdev/fused/replay.py) reads the key a trie
// child expects: TupleKey reads the key's tuples as recorder.record built them, CompiledKey the same key
// read once into C++ parts, so that the guard compares a call's tensors' dtypes, sizes, strides and
// offsets against plain integers instead of unboxing each from the key's tuples again (an optimizer's
// foreach op guards 76 to 228 tensors, each with two int tuples, every step). See native.cpp.
//
//   fused_guard(key)   the key (recorder.record's: op, context, parts..., [kwarg names]) read into a
//                      capsule that fused_match takes after its other arguments. The capsule holds the
//                      key: the parts borrow from it.
//
// A compiled part answers every question of the walk exactly as its tuple does (TupleKey in fused.cpp):
// a tuple of another form than the walk expects where it reads it is kept as "no such part", and fails
// the same comparisons.

#include "native.h"

#include <c10/core/TensorImpl.h>
#include <torch/csrc/DynamicTypes.h>

#include <cstdint>
#include <vector>

namespace jaxdev_native {

namespace {

bool long_is(PyObject* o, long long value) {
  if (!PyLong_CheckExact(o)) return false;
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  return !overflow && v == value && !(v == -1 && PyErr_Occurred());
}

bool ints_are(PyObject* seq, c10::IntArrayRef values) {
  if (!PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) != static_cast<Py_ssize_t>(values.size())) return false;
  for (size_t i = 0; i < values.size(); i++) {
    if (!long_is(PyTuple_GET_ITEM(seq, i), values[i])) return false;
  }
  return true;
}

}  // namespace

// Whether `impl` has the layout `meta`, a 4-tuple (dtype, sizes, strides, offset) as the recorder keys it.
bool same_layout(c10::TensorImpl* impl, PyObject* meta) {
  PyObject* dtype = reinterpret_cast<PyObject*>(torch::getTHPDtype(c10::typeMetaToScalarType(impl->dtype())));
  return PyTuple_GET_ITEM(meta, 0) == dtype && ints_are(PyTuple_GET_ITEM(meta, 1), impl->sizes()) &&
         ints_are(PyTuple_GET_ITEM(meta, 2), impl->strides()) && long_is(PyTuple_GET_ITEM(meta, 3), impl->storage_offset());
}

namespace {

// The key's parts read from its tuple as recorder.record built it (key[0] the op, key[1] the context).
struct TupleKey {
  PyObject* key;
  Py_ssize_t next = 2;

  // The next part of the key, borrowed, if it is a tuple of `size` items.
  PyObject* part(Py_ssize_t size) {
    if (next >= PyTuple_GET_SIZE(key)) return nullptr;
    PyObject* p = PyTuple_GET_ITEM(key, next++);
    return PyTuple_CheckExact(p) && PyTuple_GET_SIZE(p) == size ? p : nullptr;
  }

  bool seq(PyObject* type, Py_ssize_t n) {
    PyObject* p = part(2);
    return p && PyTuple_GET_ITEM(p, 0) == type && long_is(PyTuple_GET_ITEM(p, 1), n);
  }

  bool number() { return part(1) != nullptr; }

  PyObject* scalar(PyObject* type) {
    PyObject* p = part(2);
    return p && PyTuple_GET_ITEM(p, 0) == type ? PyTuple_GET_ITEM(p, 1) : nullptr;
  }

  PyObject* tensor_slot(c10::TensorImpl* impl) {
    PyObject* p = part(2);
    if (!p) return nullptr;
    PyObject* meta = PyTuple_GET_ITEM(p, 1);
    if (!PyTuple_CheckExact(meta) || PyTuple_GET_SIZE(meta) != 4 || !same_layout(impl, meta)) return nullptr;
    return PyTuple_GET_ITEM(p, 0);
  }

  PyObject* names() { return next < PyTuple_GET_SIZE(key) ? PyTuple_GET_ITEM(key, next++) : nullptr; }

  bool done() const { return next == PyTuple_GET_SIZE(key); }
};

// PyLong_AsLongLongAndOverflow's value of an exact int that fits, as the tuple walk's long_is reads it.
bool exact_long(PyObject* o, long long& out) {
  if (!PyLong_CheckExact(o)) return false;
  int overflow = 0;
  out = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (overflow || (out == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return false;
  }
  return true;
}

// The ints of `seq` as ints_are compares them: a tuple (or subclass) of exact ints that fit.
bool exact_longs(PyObject* seq, std::vector<int64_t>& out) {
  if (!PyTuple_Check(seq)) return false;
  out.resize(PyTuple_GET_SIZE(seq));
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(seq); i++) {
    long long v;
    if (!exact_long(PyTuple_GET_ITEM(seq, i), v)) return false;
    out[i] = v;
  }
  return true;
}

bool same_ints(c10::IntArrayRef values, const std::vector<int64_t>& expected) {
  return values.size() == expected.size() && std::equal(values.begin(), values.end(), expected.begin());
}

}  // namespace

struct GuardPart {
  PyObject* raw = nullptr;      // the key's item itself (borrowed from the key the guard holds)
  Py_ssize_t size = -1;         // its length where it is an exact tuple, else -1
  PyObject* first = nullptr;    // its items 0 and 1 (2-tuples)
  PyObject* second = nullptr;
  bool count_ok = false;        // `second` an exact int that fits: `count`
  long long count = 0;
  bool layout_ok = false;       // `second` an exact 4-tuple (dtype, sizes, strides, offset) of readable ints
  PyObject* dtype = nullptr;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
};

struct Guard {
  PyObject* key = nullptr;  // owned
  std::vector<GuardPart> parts;  // key[2:]
};

namespace {

void read_part(PyObject* item, GuardPart& g) {
  g.raw = item;
  if (!PyTuple_CheckExact(item)) return;
  g.size = PyTuple_GET_SIZE(item);
  if (g.size != 2) return;
  g.first = PyTuple_GET_ITEM(item, 0);
  g.second = PyTuple_GET_ITEM(item, 1);
  g.count_ok = exact_long(g.second, g.count);
  PyObject* meta = g.second;
  if (!PyTuple_CheckExact(meta) || PyTuple_GET_SIZE(meta) != 4) return;
  long long offset;
  g.layout_ok = exact_longs(PyTuple_GET_ITEM(meta, 1), g.sizes) && exact_longs(PyTuple_GET_ITEM(meta, 2), g.strides) &&
                exact_long(PyTuple_GET_ITEM(meta, 3), offset);
  g.dtype = PyTuple_GET_ITEM(meta, 0);
  g.offset = offset;
}

void free_guard(PyObject* capsule) {
  auto* g = static_cast<Guard*>(PyCapsule_GetPointer(capsule, "jaxdev.fused_guard"));
  if (!g) {
    PyErr_Clear();
    return;
  }
  Py_XDECREF(g->key);
  delete g;
}

}  // namespace

// The compiled key's parts, read in order by the walk (fused.cpp): each method consumes one part and
// answers as TupleKey's twin does on the same key.
struct CompiledKey {
  const Guard* guard;
  size_t next = 0;

  const GuardPart* take() { return next < guard->parts.size() ? &guard->parts[next++] : nullptr; }

  // (type, n): a list/tuple argument's, or the arguments' own
  bool seq(PyObject* type, Py_ssize_t n) {
    const GuardPart* p = take();
    return p && p->size == 2 && p->first == type && p->count_ok && p->count == n;
  }

  // (Number,): a lifted float
  bool number() {
    const GuardPart* p = take();
    return p && p->size == 1;
  }

  // (type, value): the value to compare a scalar of `type` with, or nullptr
  PyObject* scalar(PyObject* type) {
    const GuardPart* p = take();
    return p && p->size == 2 && p->first == type ? p->second : nullptr;
  }

  // (slot, meta): a tensor with `impl`'s layout; the expected slot, or nullptr (no such part, no layout match)
  PyObject* tensor_slot(c10::TensorImpl* impl) {
    const GuardPart* p = take();
    if (!p || p->size != 2 || !p->layout_ok) return nullptr;
    PyObject* dtype = reinterpret_cast<PyObject*>(torch::getTHPDtype(c10::typeMetaToScalarType(impl->dtype())));
    if (p->dtype != dtype || !same_ints(impl->sizes(), p->sizes) || !same_ints(impl->strides(), p->strides) ||
        impl->storage_offset() != p->offset) {
      return nullptr;
    }
    return p->first;
  }

  // the keyword names' part, or nullptr
  PyObject* names() {
    const GuardPart* p = take();
    return p ? p->raw : nullptr;
  }

  bool done() const { return next == guard->parts.size(); }
};

// The guard in a capsule fused_guard made, or nullptr (no error set) for anything else.
const Guard* guard_of(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, "jaxdev.fused_guard")) return nullptr;
  return static_cast<const Guard*>(PyCapsule_GetPointer(capsule, "jaxdev.fused_guard"));
}

PyObject* fused_guard(PyObject*, PyObject* key) {
  if (!PyTuple_CheckExact(key) || PyTuple_GET_SIZE(key) < 2) {
    PyErr_SetString(PyExc_TypeError, "fused_guard(key: tuple of at least op and context)");
    return nullptr;
  }
  auto* g = new Guard;
  g->key = Py_NewRef(key);
  g->parts.resize(PyTuple_GET_SIZE(key) - 2);
  for (Py_ssize_t i = 2; i < PyTuple_GET_SIZE(key); i++) read_part(PyTuple_GET_ITEM(key, i), g->parts[i - 2]);
  PyObject* capsule = PyCapsule_New(g, "jaxdev.fused_guard", free_guard);
  if (!capsule) {
    Py_DECREF(g->key);
    delete g;
  }
  return capsule;
}

}  // namespace jaxdev_native
