// Storages and their boxes: a jax tensor made around an array (wrap, new_storage) on a storage that
// reports its death, which removes its Box from tensor.BOXES (drop_dead, set_boxes). See native.cpp.

#include "native.h"

#include <structmember.h>

#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Storage.h>
#include <torch/csrc/autograd/python_variable.h>

#include <mutex>
#include <vector>

namespace jaxdev_native {

PyObject* g_boxes = nullptr;     // tensor.BOXES
PyObject* g_box_type = nullptr;  // tensor.Box
PyObject* s_logical = nullptr;
PyObject* s_array = nullptr;
PyObject* s_dtype = nullptr;
PyObject* s_shape = nullptr;
PyObject* s_numel = nullptr;
PyObject* s_weak = nullptr;
PyObject* s_untyped = nullptr;
PyObject* s_writes = nullptr;
PyObject* g_zero = nullptr;

// Byte offsets of Box's slots, read from its member descriptors by set_boxes: a new box's slots are
// filled directly, as Box.__init__ fills them, without seven attribute lookups.
struct BoxSlots {
  Py_ssize_t array, logical, numel, dtype, weak, untyped, writes;
} g_slots;

// Fake addresses of storages made by wrap that died on a thread without the GIL (autograd's device
// threads free saved tensors): their boxes are removed under the GIL by the next wrap or drop_dead.
// Allocated once and never freed: storages still die during interpreter shutdown, after static
// destructors have run.
std::mutex* g_dead_mutex = new std::mutex;
std::vector<void*>* g_dead = new std::vector<void*>;

bool drop_box(void* address);

// A storage's data pointer's deleter. Where its thread holds the GIL (`del t`, a collected cycle, a
// kernel's temporaries) the box goes at once, so the buffer is free when the tensor is, as CUDA's
// allocator frees a block: torch.jax.memory_allocated() drops at `del t`, not at the next op. The
// deleter runs inside whatever Python code let the tensor go, so the exception being raised there,
// if any, is kept, and a failure here is reported as unraisable rather than raised into that code.
void storage_died(void* address) {
#if PY_VERSION_HEX >= 0x030D0000
  bool finalizing = Py_IsFinalizing();
#else
  bool finalizing = _Py_IsFinalizing();
#endif
  if (g_boxes && !finalizing && PyGILState_Check()) {
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (!drop_box(address)) PyErr_WriteUnraisable(g_boxes);
    PyErr_Restore(type, value, traceback);
    return;
  }
  std::lock_guard<std::mutex> guard(*g_dead_mutex);
  g_dead->push_back(address);
}

// As torch._C._construct_storage_from_data_pointer makes it: byte-sized, not resizable, with the allocator
// copy-on-write copies come from (cow.cpp)
// (a resize goes through jaxdev's own resize_ kernel, which gives the tensor a new storage).
// The data pointer's deleter records the storage's death (storage_died).
at::Tensor make_tensor(const std::vector<int64_t>& sizes, int64_t numel, c10::ScalarType dtype, void* address) {
  auto meta = c10::scalarTypeToTypeMeta(dtype);
  c10::Device device(c10::DeviceType::PrivateUse1, 0);
  c10::DataPtr data(address, address, &storage_died, device);
  c10::Storage storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), numel * static_cast<int64_t>(meta.itemsize()), std::move(data),
      storage_allocator(), /*resizable=*/false));
  // TensorImpl adds the autograd and autocast keys of the backend itself (none in inference mode).
  auto t = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), meta);
  t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  return t;
}

// A shape tuple's sizes and their product; false (a Python error set) when one is not an int >= 0.
bool read_sizes(PyObject* shape, std::vector<int64_t>& sizes, int64_t& numel) {
  if (!PyTuple_Check(shape)) {
    PyErr_SetString(PyExc_TypeError, "a shape must be a tuple");
    return false;
  }
  Py_ssize_t ndim = PyTuple_GET_SIZE(shape);
  sizes.resize(ndim);
  numel = 1;
  for (Py_ssize_t i = 0; i < ndim; i++) {
    sizes[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
    if (sizes[i] < 0) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a size must not be negative");
      return false;
    }
    numel *= sizes[i];
  }
  return true;
}

bool check_ready();

void set_slot(PyObject* box, Py_ssize_t offset, PyObject* value) {
  auto** slot = reinterpret_cast<PyObject**>(reinterpret_cast<char*>(box) + offset);
  Py_XSETREF(*slot, value);  // steals `value`
}

// Releases the StorageImpl that `box`'s weak slot names, if any, and sets the slot to `value` (stolen):
// None when the box goes, 0 when its storages share it copy-on-write (cow.cpp).
void replace_weak(PyObject* box, PyObject* value) {
  PyObject* weak = *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(box) + g_slots.weak);
  if (weak && PyLong_Check(weak)) {
    auto* impl = static_cast<c10::StorageImpl*>(PyLong_AsVoidPtr(weak));
    if (impl) c10::raw::weak_intrusive_ptr::decref(impl);
  }
  set_slot(box, g_slots.weak, value);
}

// Box(array, numel, dtype) with box.weak set, as Box.__init__ and tensor._keep would leave it.
PyObject* new_box(PyObject* array, int64_t numel, PyObject* dtype, void* weak) {
  auto* type = reinterpret_cast<PyTypeObject*>(g_box_type);
  PyObject* n = PyLong_FromLongLong(numel);
  PyObject* w = PyLong_FromVoidPtr(weak);
  PyObject* box = (n && w) ? type->tp_alloc(type, 0) : nullptr;
  if (!box) {
    Py_XDECREF(n);
    Py_XDECREF(w);
    return nullptr;
  }
  Py_INCREF(array);
  set_slot(box, g_slots.array, array);
  Py_INCREF(Py_None);
  set_slot(box, g_slots.logical, Py_None);
  set_slot(box, g_slots.numel, n);
  Py_INCREF(dtype);
  set_slot(box, g_slots.dtype, dtype);
  set_slot(box, g_slots.weak, w);
  Py_INCREF(Py_False);
  set_slot(box, g_slots.untyped, Py_False);
  Py_INCREF(g_zero);
  set_slot(box, g_slots.writes, g_zero);
  return box;
}

// Removes the box of the dead storage at `address` from BOXES (under the GIL), releasing its weak
// reference; no box is fine (forgotten already: a trace's scratch boxes). False with a Python error set
// if removing it failed.
bool drop_box(void* address) {
  PyObject* key = PyLong_FromVoidPtr(address);
  if (!key) return false;
  PyObject* box = PyDict_GetItemWithError(g_boxes, key);  // borrowed
  bool ok = box || !PyErr_Occurred();
  if (box && PyObject_TypeCheck(box, reinterpret_cast<PyTypeObject*>(g_box_type))) {  // Box or a subclass
    // The box's weak reference (box.weak) may name another StorageImpl by now (a storage resized in
    // place keeps its StorageImpl and takes a new box): release whatever it names.
    Py_INCREF(Py_None);
    replace_weak(box, Py_None);
    ok = PyDict_DelItem(g_boxes, key) == 0;
  }
  Py_DECREF(key);
  return ok;
}

// Removes the boxes of the storages that died without the GIL. Returns false with a Python error set
// if removing one failed.
bool drop_dead_boxes() {
  std::vector<void*> dead;
  {
    std::lock_guard<std::mutex> guard(*g_dead_mutex);
    if (g_dead->empty()) return true;
    dead.swap(*g_dead);
  }
  for (void* address : dead) {
    if (!drop_box(address)) return false;
  }
  return true;
}

PyObject* drop_dead(PyObject*, PyObject*) {
  if (!check_ready()) return nullptr;
  if (!drop_dead_boxes()) return nullptr;
  Py_RETURN_NONE;
}

// The tensor for `array` (dtype `dtype`, a torch.dtype object), on a new storage at `address` whose Box
// is entered in BOXES; false with a Python error set on failure.
bool wrap_array(PyObject* array, PyObject* dtype, PyObject* address_obj, at::Tensor& out) {
  PyObject* shape = PyObject_GetAttr(array, s_shape);
  if (!shape) return false;
  std::vector<int64_t> sizes;
  int64_t numel;
  bool ok = read_sizes(shape, sizes, numel);
  Py_DECREF(shape);
  if (!ok) return false;
  void* address = PyLong_AsVoidPtr(address_obj);
  if (PyErr_Occurred()) return false;
  at::Tensor t;
  void* weak;
  try {
    t = make_tensor(sizes, numel, reinterpret_cast<THPDtype*>(dtype)->scalar_type, address);
    weak = c10::raw::intrusive_ptr::make_weak(t.storage().unsafeGetStorageImpl());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return false;
  }
  PyObject* box = new_box(array, numel, dtype, weak);
  if (!box) {
    c10::raw::weak_intrusive_ptr::decref(static_cast<c10::StorageImpl*>(weak));
    return false;
  }
  int entered = PyDict_SetItem(g_boxes, address_obj, box);
  Py_DECREF(box);  // BOXES holds it (or, on failure, the box goes; the storage's death is then a no-op)
  if (entered != 0) return false;
  out = std::move(t);
  return true;
}

PyObject* wrap(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (!check_ready()) return nullptr;
  if (nargs != 3 || !THPDtype_Check(args[1]) || !PyLong_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "wrap(array, dtype: torch.dtype, address: int)");
    return nullptr;
  }
  if (!drop_dead_boxes()) return nullptr;
  at::Tensor t;
  if (!wrap_array(args[0], args[1], args[2], t)) return nullptr;
  return THPVariable_Wrap(std::move(t));
}

PyObject* new_storage(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyLong_Check(args[0]) || !PyLong_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "new_storage(address: int, nbytes: int)");
    return nullptr;
  }
  if (!check_ready() || !drop_dead_boxes()) return nullptr;
  void* address = PyLong_AsVoidPtr(args[0]);
  long long nbytes = PyLong_AsLongLong(args[1]);
  if (PyErr_Occurred()) return nullptr;
  if (nbytes < 0) {
    PyErr_SetString(PyExc_ValueError, "new_storage: negative size");
    return nullptr;
  }
  try {
    c10::Device device(c10::DeviceType::PrivateUse1, 0);
    c10::Storage storage(c10::make_intrusive<c10::StorageImpl>(
        c10::StorageImpl::use_byte_size_t(), nbytes, c10::DataPtr(address, address, &storage_died, device),
        storage_allocator(), /*resizable=*/false));
    return THPStorage_Wrap(std::move(storage));
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
  const std::pair<const char*, Py_ssize_t*> slots[] = {
      {"_array", &g_slots.array}, {"logical", &g_slots.logical}, {"numel", &g_slots.numel},
      {"dtype", &g_slots.dtype},  {"weak", &g_slots.weak},       {"untyped", &g_slots.untyped},
      {"writes", &g_slots.writes}};
  for (const auto& [name, offset] : slots) {
    PyObject* descr = PyObject_GetAttrString(args[1], name);
    if (!descr) return nullptr;
    bool member = Py_IS_TYPE(descr, &PyMemberDescr_Type);
    if (member) *offset = reinterpret_cast<PyMemberDescrObject*>(descr)->d_member->offset;
    Py_DECREF(descr);
    if (!member) {
      PyErr_Format(PyExc_TypeError, "set_boxes: Box.%s is not a slot", name);
      return nullptr;
    }
  }
  Py_INCREF(args[0]);
  Py_XSETREF(g_boxes, args[0]);
  Py_INCREF(args[1]);
  Py_XSETREF(g_box_type, args[1]);
  Py_RETURN_NONE;
}

}  // namespace jaxdev_native
