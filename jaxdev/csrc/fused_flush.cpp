// Fused eager's flush, its per-storage loops without a Python frame (jaxdev/fused/recorder.py's flush,
// jaxdev/fused/program.py's _layout). See native.cpp.
//
//   fused_layout(inputs, input_metas[, previous, offset])  the program's inputs as program._layout builds
//       them, when every input tensor is still on the storage and at the layout recorded (input_metas:
//       (storage, (dtype, sizes, strides, offset))) and every storage has its box: (metas, storages,
//       boxes, same), metas[i] being (storage group, dtype, sizes, strides, offset, False, False). None
//       otherwise: Python decides. previous: the key of the program's last call (metas..., then from
//       `offset` on each storage's (numel, dtype, False)); a meta of it is reused where it holds this
//       call's group and the very objects of its recorded meta (a replayed segment's metas are the trie's
//       own), and `same` says whether every meta was and every storage's numel and dtype are as in it.
//   fused_alive(pending)  for each (box, node, m): whether a tensor still holds the box's storage (its
//       weak reference, box.weak, is 0 for a copy-on-write box, alive while it is in BOXES).
//   fused_settle(pending, alive, values)  each live box gets the next of `values` and becomes a plain
//       Box (boxes.settle), each dead one gets None.
//   fused_unwrite(boxes)  each box becomes a plain Box again (boxes.unwritten).

#include "native.h"

#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/COW.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/Storage.h>
#include <torch/csrc/autograd/python_variable.h>

#include <unordered_map>

namespace jaxdev_native {

namespace {

PyObject* slot_of(PyObject* box, Py_ssize_t offset) {
  return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(box) + offset);
}

// Whether tensor `t` is on `storage`'s data and has the layout `meta` (dtype, sizes, strides, offset).
bool placed_as_recorded(const at::Tensor& t, const c10::Storage& storage, PyObject* meta) {
  c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (!impl->has_storage() || impl->is_nested() || impl->is_python_dispatch() || impl->has_symbolic_sizes_strides()) {
    return false;
  }
  const c10::StorageImpl* own = impl->unsafe_storage().unsafeGetStorageImpl();
  if (c10::impl::cow::is_cow_data_ptr(own->data_ptr()) || own->data() != storage.data()) return false;
  if (!PyTuple_CheckExact(meta) || PyTuple_GET_SIZE(meta) != 4) return false;
  return same_layout(impl, meta);
}

// previous[i] (a new reference) where it is the meta (g, *meta, False, False) made of the very objects of
// `meta` (dtype, sizes, strides, offset), else nullptr (no error set): equal values, so the same key.
PyObject* reused_meta(PyObject* candidate, Py_ssize_t g, PyObject* meta) {
  if (!PyTuple_CheckExact(candidate) || PyTuple_GET_SIZE(candidate) != 7 ||
      !PyLong_CheckExact(PyTuple_GET_ITEM(candidate, 0)) || PyLong_AsSsize_t(PyTuple_GET_ITEM(candidate, 0)) != g ||
      PyTuple_GET_ITEM(candidate, 5) != Py_False || PyTuple_GET_ITEM(candidate, 6) != Py_False) {
    PyErr_Clear();
    return nullptr;
  }
  for (Py_ssize_t j = 0; j < 4; j++) {
    if (PyTuple_GET_ITEM(candidate, j + 1) != PyTuple_GET_ITEM(meta, j)) return nullptr;
  }
  return Py_NewRef(candidate);
}

// -1: an error is set; 1: previous[at] is (box.numel, box.dtype, False); 0: it is not.
int same_storage(PyObject* box, PyObject* previous, Py_ssize_t at) {
  if (at >= PyTuple_GET_SIZE(previous)) return 0;
  PyObject* part = PyTuple_GET_ITEM(previous, at);
  if (!PyTuple_CheckExact(part) || PyTuple_GET_SIZE(part) != 3 || PyTuple_GET_ITEM(part, 2) != Py_False) return 0;
  if (slot_of(box, g_slots.dtype) != PyTuple_GET_ITEM(part, 1)) return 0;  // a box's slots: read, not looked up
  PyObject* numel = slot_of(box, g_slots.numel);
  return numel ? PyObject_RichCompareBool(numel, PyTuple_GET_ITEM(part, 0), Py_EQ) : 0;
}

}  // namespace

// Gives `box` (a Box or a subclass) the class `type` in place. False with an error set.
bool set_class(PyObject* box, PyObject* type) {
  if (Py_TYPE(box) == reinterpret_cast<PyTypeObject*>(type)) return true;
  if (!PyObject_TypeCheck(box, reinterpret_cast<PyTypeObject*>(g_box_type))) {
    PyErr_SetString(PyExc_TypeError, "jaxdev native: not a Box");
    return false;
  }
  PyTypeObject* old = Py_TYPE(box);
  Py_INCREF(type);
  Py_SET_TYPE(box, reinterpret_cast<PyTypeObject*>(type));
  if (old->tp_flags & Py_TPFLAGS_HEAPTYPE) Py_DECREF(old);
  return true;
}

PyObject* fused_layout(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if ((nargs != 2 && nargs != 4) || !PyList_Check(args[0]) || !PyList_Check(args[1]) ||
      PyList_GET_SIZE(args[0]) != PyList_GET_SIZE(args[1]) || (nargs == 4 && !PyLong_Check(args[3]))) {
    PyErr_SetString(PyExc_TypeError,
                    "fused_layout(inputs: list, input_metas: list of the same length[, previous, offset: int])");
    return nullptr;
  }
  if (!check_ready()) return nullptr;
  Py_ssize_t n = PyList_GET_SIZE(args[0]);
  PyObject* previous = nargs == 4 && PyTuple_CheckExact(args[2]) ? args[2] : nullptr;
  Py_ssize_t offset = 0;
  if (previous) {
    offset = PyLong_AsSsize_t(args[3]);
    if (offset == -1 && PyErr_Occurred()) PyErr_Clear();
    if (offset < n || offset > PyTuple_GET_SIZE(previous)) previous = nullptr;
  }
  bool same = previous != nullptr;
  PyObject* metas = PyList_New(0);
  PyObject* storages = PyList_New(0);
  PyObject* boxes = PyList_New(0);
  std::unordered_map<const void*, Py_ssize_t> group;
  bool ok = metas && storages && boxes, plain = true;
  try {
    for (Py_ssize_t i = 0; ok && plain && i < n; i++) {
      PyObject* t = PyList_GET_ITEM(args[0], i);
      PyObject* entry = PyList_GET_ITEM(args[1], i);
      if (!THPVariable_Check(t) || !PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 2 ||
          !THPStorage_Check(PyTuple_GET_ITEM(entry, 0))) {
        plain = false;
        break;
      }
      PyObject* storage = PyTuple_GET_ITEM(entry, 0);
      PyObject* meta = PyTuple_GET_ITEM(entry, 1);
      const c10::Storage& recorded = THPStorage_Unpack(storage);
      if (!placed_as_recorded(THPVariable_Unpack(t), recorded, meta)) {
        plain = false;
        break;
      }
      const void* address = recorded.data();
      auto found = group.find(address);
      Py_ssize_t g;
      if (found == group.end()) {
        PyObject* key = PyLong_FromVoidPtr(const_cast<void*>(address));
        PyObject* box = key ? PyDict_GetItemWithError(g_boxes, key) : nullptr;  // borrowed
        Py_XDECREF(key);
        if (!box) {
          ok = !PyErr_Occurred();
          plain = false;  // not a jax storage: Python says why
          break;
        }
        g = static_cast<Py_ssize_t>(group.size());
        group.emplace(address, g);
        ok = PyList_Append(storages, storage) == 0 && PyList_Append(boxes, box) == 0;
        if (ok && same) {
          int r = same_storage(box, previous, offset + g);
          ok = r >= 0;
          same = r == 1;
        }
      } else {
        g = found->second;
      }
      PyObject* m = ok && same ? reused_meta(PyTuple_GET_ITEM(previous, i), g, meta) : nullptr;
      if (!m && ok) {
        same = false;
        PyObject* index = PyLong_FromSsize_t(g);
        m = index ? PyTuple_Pack(7, index, PyTuple_GET_ITEM(meta, 0), PyTuple_GET_ITEM(meta, 1),
                                 PyTuple_GET_ITEM(meta, 2), PyTuple_GET_ITEM(meta, 3), Py_False, Py_False)
                  : nullptr;
        Py_XDECREF(index);
      }
      ok = m && PyList_Append(metas, m) == 0;
      Py_XDECREF(m);
    }
  } catch (const std::exception&) {  // a tensor without sizes or strides to read: Python decides
    PyErr_Clear();
    plain = false;
  }
  PyObject* out = nullptr;
  if (ok && plain) {
    out = PyTuple_Pack(4, metas, storages, boxes, same ? Py_True : Py_False);
  } else if (ok) {
    out = Py_NewRef(Py_None);
  }
  Py_XDECREF(metas);
  Py_XDECREF(storages);
  Py_XDECREF(boxes);
  return out;
}

PyObject* fused_alive(PyObject*, PyObject* pending) {
  if (!PyList_Check(pending) || !check_ready()) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "fused_alive(pending: list)");
    return nullptr;
  }
  Py_ssize_t n = PyList_GET_SIZE(pending);
  PyObject* out = PyTuple_New(n);
  for (Py_ssize_t i = 0; out && i < n; i++) {
    PyObject* entry = PyList_GET_ITEM(pending, i);
    PyObject* box = PyTuple_Check(entry) && PyTuple_GET_SIZE(entry) > 0 ? PyTuple_GET_ITEM(entry, 0) : nullptr;
    if (!box || !PyObject_TypeCheck(box, reinterpret_cast<PyTypeObject*>(g_box_type))) {
      PyErr_SetString(PyExc_TypeError, "fused_alive: an entry is not (Box, node, m)");
      Py_CLEAR(out);
      break;
    }
    PyObject* weak = slot_of(box, g_slots.weak);
    bool alive = false;
    if (weak && weak != Py_None) {
      void* impl = PyLong_AsVoidPtr(weak);
      if (!impl && PyErr_Occurred()) {
        Py_CLEAR(out);
        break;
      }
      // 0: a copy-on-write box (cow.cpp); else a weak reference to the StorageImpl (torch's _expired)
      alive = !impl || c10::raw::weak_intrusive_ptr::use_count(static_cast<c10::StorageImpl*>(impl)) > 0;
    }
    PyTuple_SET_ITEM(out, i, Py_NewRef(alive ? Py_True : Py_False));
  }
  return out;
}

PyObject* fused_settle(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyList_Check(args[0]) || !PyTuple_Check(args[1]) ||
      PyTuple_GET_SIZE(args[1]) != PyList_GET_SIZE(args[0]) || !PySequence_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "fused_settle(pending: list, alive: tuple, values: sequence)");
    return nullptr;
  }
  PyObject* values = PySequence_Fast(args[2], "fused_settle: values");
  if (!values) return nullptr;
  Py_ssize_t given = 0, n = PyList_GET_SIZE(args[0]);
  bool ok = true;
  for (Py_ssize_t i = 0; ok && i < n; i++) {
    PyObject* box = PyTuple_GET_ITEM(PyList_GET_ITEM(args[0], i), 0);
    PyObject* value = Py_None;
    if (PyTuple_GET_ITEM(args[1], i) == Py_True) {
      if (given >= PySequence_Fast_GET_SIZE(values)) {
        PyErr_SetString(PyExc_IndexError, "fused_settle: fewer values than live boxes");
        ok = false;
        break;
      }
      value = PySequence_Fast_GET_ITEM(values, given++);
    }
    ok = set_class(box, g_box_type);
    if (ok) set_slot(box, g_slots.array, Py_NewRef(value));
  }
  Py_DECREF(values);
  if (!ok) return nullptr;
  Py_RETURN_NONE;
}

PyObject* fused_unwrite(PyObject*, PyObject* boxes) {
  if (!PyList_Check(boxes)) {
    PyErr_SetString(PyExc_TypeError, "fused_unwrite(boxes: list)");
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(boxes); i++) {
    if (!set_class(PyList_GET_ITEM(boxes, i), g_box_type)) return nullptr;
  }
  Py_RETURN_NONE;
}

}  // namespace jaxdev_native
