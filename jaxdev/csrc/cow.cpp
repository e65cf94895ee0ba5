// Copy-on-write storages for jax tensors: PyTorch's own lazy clone (c10::impl::cow, behind
// Tensor._lazy_clone) over jaxdev's fake addresses.
//
// c10 makes a storage copy-on-write by wrapping its data pointer in a shared context; two storages
// then hold the same address, so the same Box in BOXES, and `torch._C._is_cow_tensor` says True as on
// CPU. A write first asks for the storage's mutable data pointer (every box lookup that may write goes
// through `untyped_storage().data_ptr()`), and c10 materializes it: the last reference keeps the
// address, any other gets a copy from the storage's allocator, which is `StorageAllocator` below:
// a new fake address whose Box holds the same immutable jax array (nothing is copied on the device;
// a write replaces the box's array, and donation never takes an array two boxes hold).
//
// A box shared that way has no single StorageImpl to follow, so its `weak` slot holds 0: its life is
// its data pointer's, whose deleter (storage_died) removes it, as for every storage this module makes.

#include "native.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>
#include <c10/core/impl/COW.h>
#include <torch/csrc/Storage.h>
#include <torch/csrc/autograd/python_variable.h>

#include <string>

namespace jaxdev_native {

// The Python error now set, as text, cleared: for a C++ exception raised where Python called in.
std::string take_python_error() {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  std::string text = "unknown error";
  PyObject* s = value ? PyObject_Str(value) : nullptr;
  if (s && PyUnicode_Check(s)) text = PyUnicode_AsUTF8(s);
  if (!s) PyErr_Clear();
  Py_XDECREF(s);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  return text;
}

// BOXES[dest] = a Box holding what BOXES[src] holds (array or logical form, count, dtype), weak 0.
// False with a Python error set on failure.
bool copy_box(void* dest, const void* src) {
  PyObject* src_key = PyLong_FromVoidPtr(const_cast<void*>(src));
  PyObject* box = src_key ? PyDict_GetItemWithError(g_boxes, src_key) : nullptr;  // borrowed
  Py_XDECREF(src_key);
  if (!box) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "jaxdev: a copy-on-write storage has no data");
    return false;
  }
  auto* type = reinterpret_cast<PyTypeObject*>(g_box_type);
  PyObject* copy = type->tp_alloc(type, 0);
  PyObject* dest_key = copy ? PyLong_FromVoidPtr(dest) : nullptr;
  if (!dest_key) {
    Py_XDECREF(copy);
    return false;
  }
  auto slot = [](PyObject* b, Py_ssize_t offset) {
    return *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(b) + offset);
  };
  for (Py_ssize_t offset : {g_slots.array, g_slots.logical, g_slots.numel, g_slots.dtype, g_slots.untyped}) {
    PyObject* value = slot(box, offset);
    Py_XINCREF(value);
    set_slot(copy, offset, value);
  }
  Py_INCREF(g_zero);
  set_slot(copy, g_slots.weak, g_zero);
  Py_INCREF(g_zero);
  set_slot(copy, g_slots.writes, g_zero);
  bool ok = PyDict_SetItem(g_boxes, dest_key, copy) == 0;
  Py_DECREF(dest_key);
  Py_DECREF(copy);
  return ok;
}

// The allocator of every storage this module makes. Only c10's copy-on-write materialization calls
// it (clone = allocate + copy_data): jaxdev's own storages are made by new_storage and wrap.
struct StorageAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t) override {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject* address = g_next_address ? PyIter_Next(g_next_address) : nullptr;
    void* p = address ? PyLong_AsVoidPtr(address) : nullptr;
    Py_XDECREF(address);
    std::string error = p ? "" : (PyErr_Occurred() ? take_python_error() : "set_allocation was not called");
    PyGILState_Release(gil);
    TORCH_CHECK(p, "jaxdev: no address for a copy-on-write storage's copy: ", error);
    return c10::DataPtr(p, p, &storage_died, c10::Device(c10::DeviceType::PrivateUse1, 0));
  }

  void copy_data(void* dest, const void* src, std::size_t) const override {
    PyGILState_STATE gil = PyGILState_Ensure();
    std::string error = copy_box(dest, src) ? "" : take_python_error();
    PyGILState_Release(gil);
    TORCH_CHECK(error.empty(), "jaxdev: copying a copy-on-write storage failed: ", error);
  }
};

c10::Allocator* storage_allocator() {
  static StorageAllocator allocator;
  return &allocator;
}

// lazy_clone(t): t._lazy_clone() as PyTorch's generic kernel makes it (t's storage and the result's
// share t's address copy-on-write), or None where that cannot be (a storage not made here, a box
// that is not a plain Box): jaxdev then clones the storage at once (ops/copy.py).
PyObject* lazy_clone(PyObject*, PyObject* arg) {
  if (!check_ready()) return nullptr;
  if (!THPVariable_Check(arg)) {
    PyErr_SetString(PyExc_TypeError, "lazy_clone(t: Tensor)");
    return nullptr;
  }
  const at::Tensor& self = THPVariable_Unpack(arg);
  c10::StorageImpl* impl = self.has_storage() ? self.storage().unsafeGetStorageImpl() : nullptr;
  if (!impl || impl->allocator() != storage_allocator()) Py_RETURN_NONE;
  PyObject* key = PyLong_FromVoidPtr(const_cast<void*>(impl->data()));
  PyObject* box = key ? PyDict_GetItemWithError(g_boxes, key) : nullptr;  // borrowed
  Py_XDECREF(key);
  if (!box) {
    if (PyErr_Occurred()) return nullptr;
    Py_RETURN_NONE;
  }
  if (Py_TYPE(box) != reinterpret_cast<PyTypeObject*>(g_box_type)) Py_RETURN_NONE;
  try {
    c10::intrusive_ptr<c10::StorageImpl> storage = c10::impl::cow::lazy_clone_storage(*impl);
    if (!storage) Py_RETURN_NONE;
    // The box now outlives whichever of the sharing storages dies last: its data pointer's deleter
    // removes it, so its weak reference to the first one goes.
    Py_INCREF(g_zero);
    replace_weak(box, g_zero);
    auto t = at::detail::make_tensor<c10::TensorImpl>(
        c10::Storage(std::move(storage)), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), self.dtype());
    t.unsafeGetTensorImpl()->set_sizes_and_strides(self.sizes(), self.strides(), self.storage_offset());
    return THPVariable_Wrap(std::move(t));
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

// data_address(storage): the storage's data pointer as `torch._C._data_address` reads a tensor's. A
// Python storage's data_ptr() asks for the mutable pointer, which materializes a copy-on-write storage:
// fused eager reads its inputs' addresses this way, so a read leaves them shared, as on CPU.
PyObject* data_address(PyObject*, PyObject* arg) {
  if (!THPStorage_Check(arg)) {
    PyErr_SetString(PyExc_TypeError, "data_address(storage: UntypedStorage)");
    return nullptr;
  }
  return PyLong_FromVoidPtr(const_cast<void*>(THPStorage_Unpack(arg).data()));
}

}  // namespace jaxdev_native
