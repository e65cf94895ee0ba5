// Fused eager's results of a recorded op (jaxdev/fused/results.py's make) in one call, without a Python
// frame, storage object or spec tuple walked per result. See native.cpp.
//
//   fused_plan(out, storages, writes, bumps, PendingBox, WrittenBox, pending)  an op's learn.Learned read
//       once into a flat plan (a capsule): `out` ("one", spec) | ("none", None) | (tuple|list, [spec...]),
//       a spec None, ("arg", i), ("value", v), ("view", i, dtype, sizes, strides, offset), ("new", m,
//       dtype, sizes, strides, offset) or ("fresh", m, dtype, sizes); storages[m] (numel, dtype);
//       `pending` the value a PendingBox holds (boxes.PENDING). None where a part is of another form.
//   fused_results(plan, seg, tensors)  what results.make does for one call of the op: the versions of
//       tensors[bumps] bumped, the plain Boxes of tensors[writes] made WrittenBoxes (appended to
//       seg.written), the results made, each new storage a PendingBox entered in BOXES, seg.slots
//       (("p", node, m)) and seg.pending ((box, node, m)), node being len(seg.nodes). NotImplemented,
//       having done nothing, where a written tensor's storage is copy-on-write: Python does it all.

#include "native.h"

#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/COW.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/variable.h>

#include <vector>

namespace jaxdev_native {

namespace {

enum class Made { kNone, kArg, kValue, kView, kNew, kFresh };
enum class Shape { kOne, kNone, kTuple, kList };

struct ResultSpec {
  Made kind = Made::kNone;
  Py_ssize_t index = 0;      // the tensor argument (arg, view) or the op's new storage m (new, fresh)
  PyObject* m = nullptr;     // m as a Python int (new, fresh): seg.slots' and seg.pending's entries
  PyObject* value = nullptr;  // kValue's value
  PyObject* dtype = nullptr;
  std::vector<int64_t> sizes, strides;
  int64_t offset = 0;
};

struct Plan {
  Shape shape = Shape::kNone;
  std::vector<ResultSpec> specs;
  std::vector<std::pair<int64_t, PyObject*>> storages;  // (numel, dtype) of each new storage
  std::vector<Py_ssize_t> writes, bumps;
  PyObject* pending_box = nullptr;
  PyObject* written_box = nullptr;
  PyObject* pending = nullptr;

  ~Plan() {
    for (auto& s : specs) {
      Py_XDECREF(s.m);
      Py_XDECREF(s.value);
      Py_XDECREF(s.dtype);
    }
    for (auto& s : storages) Py_XDECREF(s.second);
    Py_XDECREF(pending_box);
    Py_XDECREF(written_box);
    Py_XDECREF(pending);
  }
};

const char* kPlanName = "jaxdev fused plan";
PyObject* s_p = nullptr;
PyObject* s_seg_slots = nullptr;
PyObject* s_seg_pending = nullptr;
PyObject* s_seg_written = nullptr;
PyObject* s_seg_nodes = nullptr;

bool is_name(PyObject* o, const char* name) {
  return PyUnicode_Check(o) && PyUnicode_CompareWithASCIIString(o, name) == 0;
}

// A tuple of ints into `out`; false (no error set) where it is not one.
bool ints_of(PyObject* tuple, std::vector<int64_t>& out) {
  if (!PyTuple_Check(tuple)) return false;
  out.resize(PyTuple_GET_SIZE(tuple));
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); i++) {
    PyObject* v = PyTuple_GET_ITEM(tuple, i);
    if (!PyLong_CheckExact(v)) return false;
    out[i] = PyLong_AsLongLong(v);
    if (out[i] == -1 && PyErr_Occurred()) return PyErr_Clear(), false;
  }
  return true;
}

bool index_of(PyObject* o, Py_ssize_t& out) {
  if (!PyLong_CheckExact(o)) return false;
  out = PyLong_AsSsize_t(o);
  return out >= 0 || (PyErr_Clear(), false);
}

// One result spec (see the top of this file) into `s`; false where it is of another form.
bool read_spec(PyObject* spec, ResultSpec& s) {
  if (spec == Py_None) return true;
  if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) < 2) return false;
  PyObject* kind = PyTuple_GET_ITEM(spec, 0);
  Py_ssize_t n = PyTuple_GET_SIZE(spec);
  if (is_name(kind, "value") && n == 2) {
    s.kind = Made::kValue;
    s.value = Py_NewRef(PyTuple_GET_ITEM(spec, 1));
    return true;
  }
  if (!index_of(PyTuple_GET_ITEM(spec, 1), s.index)) return false;
  if (is_name(kind, "arg") && n == 2) {
    s.kind = Made::kArg;
    return true;
  }
  bool fresh = is_name(kind, "fresh") && n == 4;
  bool laid_out = (is_name(kind, "view") || is_name(kind, "new")) && n == 6;
  if (!(fresh || laid_out) || !THPDtype_Check(PyTuple_GET_ITEM(spec, 2))) return false;
  s.kind = fresh ? Made::kFresh : is_name(kind, "view") ? Made::kView : Made::kNew;
  s.dtype = Py_NewRef(PyTuple_GET_ITEM(spec, 2));
  if (s.kind != Made::kView) s.m = Py_NewRef(PyTuple_GET_ITEM(spec, 1));
  if (!ints_of(PyTuple_GET_ITEM(spec, 3), s.sizes)) return false;
  if (fresh) return true;
  PyObject* offset = PyTuple_GET_ITEM(spec, 5);
  if (!ints_of(PyTuple_GET_ITEM(spec, 4), s.strides) || s.strides.size() != s.sizes.size() || !PyLong_CheckExact(offset)) {
    return false;
  }
  s.offset = PyLong_AsLongLong(offset);
  return !(s.offset == -1 && PyErr_Occurred()) || (PyErr_Clear(), false);
}

bool read_indices(PyObject* list, std::vector<Py_ssize_t>& out) {
  if (!PyList_Check(list)) return false;
  out.resize(PyList_GET_SIZE(list));
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
    if (!index_of(PyList_GET_ITEM(list, i), out[i])) return false;
  }
  return true;
}

// The plan's results and storages; false where a part is of another form.
bool read_out(Plan& p, PyObject* out, PyObject* storages) {
  if (!PyTuple_Check(out) || PyTuple_GET_SIZE(out) != 2 || !PyList_Check(storages)) return false;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(storages); i++) {
    PyObject* s = PyList_GET_ITEM(storages, i);
    if (!PyTuple_Check(s) || PyTuple_GET_SIZE(s) != 2 || !PyLong_CheckExact(PyTuple_GET_ITEM(s, 0)) ||
        !THPDtype_Check(PyTuple_GET_ITEM(s, 1))) {
      return false;
    }
    p.storages.emplace_back(PyLong_AsLongLong(PyTuple_GET_ITEM(s, 0)), Py_NewRef(PyTuple_GET_ITEM(s, 1)));
  }
  PyObject* kind = PyTuple_GET_ITEM(out, 0);
  PyObject* specs = PyTuple_GET_ITEM(out, 1);
  if (is_name(kind, "none")) return true;
  if (is_name(kind, "one")) {
    p.shape = Shape::kOne;
    p.specs.resize(1);
    return read_spec(specs, p.specs[0]);
  }
  if (kind != reinterpret_cast<PyObject*>(&PyTuple_Type) && kind != reinterpret_cast<PyObject*>(&PyList_Type)) return false;
  if (!PyList_Check(specs) && !PyTuple_Check(specs)) return false;
  p.shape = kind == reinterpret_cast<PyObject*>(&PyTuple_Type) ? Shape::kTuple : Shape::kList;
  p.specs.resize(PySequence_Fast_GET_SIZE(specs));
  for (size_t i = 0; i < p.specs.size(); i++) {
    if (!read_spec(PySequence_Fast_GET_ITEM(specs, i), p.specs[i])) return false;
  }
  return true;
}

void free_plan(PyObject* capsule) {
  delete static_cast<Plan*>(PyCapsule_GetPointer(capsule, kPlanName));
}

// One call's making of results: the segment's containers (borrowed), the node's number, the new
// storages made so far by m.
struct Making {
  const Plan& plan;
  PyObject* tensors;
  PyObject* slots = nullptr;
  PyObject* pending = nullptr;
  PyObject* node = nullptr;
  Py_ssize_t node_index = -1;  // node's value
  std::vector<c10::Storage> made;
  bool any = false;

  Making(const Plan& p, PyObject* t) : plan(p), tensors(t), made(p.storages.size()) {}
  ~Making() {
    Py_XDECREF(slots);
    Py_XDECREF(pending);
    Py_XDECREF(node);
  }
};

// Tensor argument i, or nullptr with an error set.
const at::Tensor* argument(Making& k, Py_ssize_t i) {
  PyObject* t = i < PyList_GET_SIZE(k.tensors) ? PyList_GET_ITEM(k.tensors, i) : nullptr;
  if (!t || !THPVariable_Check(t)) {
    PyErr_SetString(PyExc_IndexError, "fused_results: a result's tensor argument");
    return nullptr;
  }
  return &THPVariable_Unpack(t);
}

// A new storage at the next fake address with its PendingBox in BOXES, seg.slots and seg.pending.
bool new_pending_storage(Making& k, Py_ssize_t m_index, PyObject* m, int64_t numel, PyObject* dtype,
                         const std::vector<int64_t>* sizes, at::Tensor& fresh, c10::Storage& storage) {
  PyObject* address_obj = PyIter_Next(g_next_address);
  if (!address_obj) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "fused_results: no fake address");
    return false;
  }
  void* address = PyLong_AsVoidPtr(address_obj);
  auto scalar = reinterpret_cast<THPDtype*>(dtype)->scalar_type;
  if (sizes) {  // the first result is the whole storage, contiguous: tensor and storage at once, as wrap
    fresh = make_tensor(*sizes, numel, scalar, address);
    storage = fresh.storage();
  } else {
    int64_t nbytes = numel * static_cast<int64_t>(c10::elementSize(scalar));
    storage = c10::Storage(c10::make_intrusive<c10::StorageImpl>(
        c10::StorageImpl::use_byte_size_t(), nbytes,
        c10::DataPtr(address, address, &storage_died, c10::Device(c10::DeviceType::PrivateUse1, 0)),
        storage_allocator(), /*resizable=*/false));
  }
  void* weak = c10::raw::intrusive_ptr::make_weak(storage.unsafeGetStorageImpl());
  PyObject* box = new_box(k.plan.pending, numel, dtype, weak);
  if (!box) c10::raw::weak_intrusive_ptr::decref(static_cast<c10::StorageImpl*>(weak));
  PyObject* slot = box ? made_slot(s_p, k.node_index, k.node, m_index, m) : nullptr;
  PyObject* entry = slot ? PyTuple_Pack(3, box, k.node, m) : nullptr;
  bool ok = entry && set_class(box, k.plan.pending_box) && PyDict_SetItem(g_boxes, address_obj, box) == 0 &&
            PyDict_SetItem(k.slots, address_obj, slot) == 0 && PyList_Append(k.pending, entry) == 0;
  Py_XDECREF(box);
  Py_XDECREF(slot);
  Py_XDECREF(entry);
  Py_DECREF(address_obj);
  k.any = true;
  return ok;
}

at::Tensor on_storage(const c10::Storage& storage, const ResultSpec& s) {
  auto meta = c10::scalarTypeToTypeMeta(reinterpret_cast<THPDtype*>(s.dtype)->scalar_type);
  // As create_empty_tensor + set_ make it (graph_view): TensorImpl adds the backend's autograd keys itself.
  auto t = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), meta);
  t.unsafeGetTensorImpl()->set_sizes_and_strides(s.sizes, s.strides, s.offset);
  return t;
}

// One result, a new reference; nullptr with an error set.
PyObject* result(Making& k, const ResultSpec& s) {
  switch (s.kind) {
    case Made::kNone:
      return Py_NewRef(Py_None);
    case Made::kValue:
      return Py_NewRef(s.value);
    case Made::kArg: {
      if (!argument(k, s.index)) return nullptr;
      return Py_NewRef(PyList_GET_ITEM(k.tensors, s.index));
    }
    case Made::kView: {
      const at::Tensor* t = argument(k, s.index);
      return t ? THPVariable_Wrap(on_storage(t->storage(), s)) : nullptr;
    }
    default:
      break;
  }
  if (s.index >= static_cast<Py_ssize_t>(k.made.size())) {
    if (s.kind != Made::kFresh) {  // a storage with its size and dtype in the plan
      PyErr_SetString(PyExc_IndexError, "fused_results: a result's new storage");
      return nullptr;
    }
    k.made.resize(s.index + 1);
  }
  c10::Storage& storage = k.made[s.index];
  if (s.kind == Made::kFresh) {  // always a storage of its own, as results._result makes it
    int64_t numel = 1;
    for (int64_t n : s.sizes) numel *= n;
    at::Tensor fresh;
    if (!new_pending_storage(k, s.index, s.m, numel, s.dtype, &s.sizes, fresh, storage)) return nullptr;
    return THPVariable_Wrap(std::move(fresh));
  }
  if (!storage) {
    const auto& [numel, dtype] = k.plan.storages[s.index];
    at::Tensor unused;
    if (!new_pending_storage(k, s.index, s.m, numel, dtype, nullptr, unused, storage)) return nullptr;
  }
  return THPVariable_Wrap(on_storage(storage, s));
}

// The storage data address of tensor argument i, as boxes.address gives it; nullptr where Python must
// decide (copy-on-write, which the recorder unshares before it records an op that writes it:
// jaxdev/fused/cow.py).
const void* written_address(const at::Tensor& t) {
  const c10::StorageImpl* storage = t.unsafeGetTensorImpl()->unsafe_storage().unsafeGetStorageImpl();
  if (!storage || c10::impl::cow::is_cow_data_ptr(storage->data_ptr())) return nullptr;
  return storage->data();
}

// The version bumps and written boxes. -1: an error is set; 0: Python decides (nothing done); 1: done.
int bump_and_write(const Plan& p, PyObject* seg, PyObject* tensors) {
  std::vector<const void*> addresses;
  for (Py_ssize_t i : p.writes) {
    PyObject* t = i < PyList_GET_SIZE(tensors) ? PyList_GET_ITEM(tensors, i) : nullptr;
    if (!t || !THPVariable_Check(t) || !THPVariable_Unpack(t).unsafeGetTensorImpl()->has_storage()) return 0;
    const void* address = written_address(THPVariable_Unpack(t));
    if (!address) return 0;
    addresses.push_back(address);
  }
  for (Py_ssize_t i : p.bumps) {
    PyObject* t = i < PyList_GET_SIZE(tensors) ? PyList_GET_ITEM(tensors, i) : nullptr;
    if (!t || !THPVariable_Check(t)) {
      PyErr_SetString(PyExc_IndexError, "fused_results: a bumped tensor argument");
      return -1;
    }
    const at::Tensor& bumped = THPVariable_Unpack(t);
    if (!bumped.unsafeGetTensorImpl()->is_inference()) {  // as torch._C._increment_version: it has no counter
      torch::autograd::impl::bump_version(bumped);
    }
  }
  if (addresses.empty()) return 1;
  PyObject* written = PyObject_GetAttr(seg, s_seg_written);
  bool ok = written && PyList_Check(written);
  for (size_t i = 0; ok && i < addresses.size(); i++) {
    PyObject* key = PyLong_FromVoidPtr(const_cast<void*>(addresses[i]));
    PyObject* box = key ? PyDict_GetItemWithError(g_boxes, key) : nullptr;  // borrowed
    Py_XDECREF(key);
    ok = box || (key && !PyErr_Occurred());
    if (box && Py_TYPE(box) == reinterpret_cast<PyTypeObject*>(g_box_type)) {
      ok = set_class(box, p.written_box) && PyList_Append(written, box) == 0;
    }
  }
  if (written && !PyList_Check(written) && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "fused_results: seg.written");
  Py_XDECREF(written);
  return ok ? 1 : -1;
}

// The op's results as `p.shape` says, a new reference; nullptr with an error set.
PyObject* results(Making& k) {
  const Plan& p = k.plan;
  if (p.shape == Shape::kNone) return Py_NewRef(Py_None);
  if (p.shape == Shape::kOne) return result(k, p.specs[0]);
  Py_ssize_t n = static_cast<Py_ssize_t>(p.specs.size());
  PyObject* out = p.shape == Shape::kTuple ? PyTuple_New(n) : PyList_New(n);
  for (Py_ssize_t i = 0; out && i < n; i++) {
    PyObject* r = result(k, p.specs[i]);
    if (!r) {
      Py_CLEAR(out);
      break;
    }
    if (p.shape == Shape::kTuple) {
      PyTuple_SET_ITEM(out, i, r);
    } else {
      PyList_SET_ITEM(out, i, r);
    }
  }
  return out;
}

}  // namespace

PyObject* fused_plan(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 7 || !PyType_Check(args[4]) || !PyType_Check(args[5])) {
    PyErr_SetString(PyExc_TypeError, "fused_plan(out, storages, writes, bumps, PendingBox, WrittenBox, pending)");
    return nullptr;
  }
  if (!s_p) {
    s_p = PyUnicode_InternFromString("p");
    s_seg_slots = PyUnicode_InternFromString("slots");
    s_seg_pending = PyUnicode_InternFromString("pending");
    s_seg_written = PyUnicode_InternFromString("written");
    s_seg_nodes = PyUnicode_InternFromString("nodes");
    if (!s_p || !s_seg_slots || !s_seg_pending || !s_seg_written || !s_seg_nodes) return nullptr;
  }
  auto* plan = new Plan;
  plan->pending_box = Py_NewRef(args[4]);
  plan->written_box = Py_NewRef(args[5]);
  plan->pending = Py_NewRef(args[6]);
  if (!read_out(*plan, args[0], args[1]) || !read_indices(args[2], plan->writes) || !read_indices(args[3], plan->bumps)) {
    delete plan;
    if (PyErr_Occurred()) return nullptr;
    Py_RETURN_NONE;
  }
  PyObject* capsule = PyCapsule_New(plan, kPlanName, free_plan);
  if (!capsule) delete plan;
  return capsule;
}

PyObject* fused_results(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  const Plan* p = nargs == 3 ? static_cast<const Plan*>(PyCapsule_GetPointer(args[0], kPlanName)) : nullptr;
  if (!p || !PyList_Check(args[2])) {
    if (!PyErr_Occurred() || p) PyErr_SetString(PyExc_TypeError, "fused_results(plan, seg, tensors: list)");
    return nullptr;
  }
  if (!check_ready() || !g_next_address || !drop_dead_boxes()) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "jaxdev native: set_allocation was not called");
    return nullptr;
  }
  PyObject* seg = args[1];
  Making k(*p, args[2]);
  PyObject* out = nullptr;
  try {
    int done = bump_and_write(*p, seg, k.tensors);
    if (done <= 0) return done == 0 ? Py_NewRef(Py_NotImplemented) : nullptr;
    k.slots = PyObject_GetAttr(seg, s_seg_slots);
    k.pending = PyObject_GetAttr(seg, s_seg_pending);
    PyObject* nodes = k.pending ? PyObject_GetAttr(seg, s_seg_nodes) : nullptr;
    k.node_index = nodes && PyList_Check(nodes) ? PyList_GET_SIZE(nodes) : -1;
    k.node = k.node_index >= 0 ? PyLong_FromSsize_t(k.node_index) : nullptr;
    Py_XDECREF(nodes);
    if (!k.node || !k.slots || !PyDict_Check(k.slots) || !PyList_Check(k.pending)) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "fused_results: seg.slots, pending or nodes");
      return nullptr;
    }
    out = results(k);
  } catch (const std::exception& e) {
    Py_CLEAR(out);
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  if (out && k.any) {  // once for the op, as results._fresh: a sweep keeps every box these tensors hold
    PyObject* r = PyObject_CallNoArgs(g_checkpoint);
    if (!r) Py_CLEAR(out);
    Py_XDECREF(r);
  }
  return out;
}

}  // namespace jaxdev_native
