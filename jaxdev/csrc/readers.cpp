// A tensor's array without a Python frame: plain_value(s), all_plain and the checks behind them.
// See native.cpp.

#include "native.h"

#include <ATen/core/Tensor.h>
#include <c10/core/TensorImpl.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/python_variable.h>

namespace jaxdev_native {


// The Box of jax tensor `impl`'s storage when it is a plain Box (not a subclass, such as a storage
// slice's) holding a physical array (not a logical value): a new reference. Py_None (a new reference)
// otherwise, the slow path then deciding (no box: it raises the right error); nullptr on error.
PyObject* physical_box(const c10::TensorImpl* impl) {
  PyObject* key = PyLong_FromVoidPtr(const_cast<void*>(impl->unsafe_storage().unsafeGetStorageImpl()->data()));
  if (!key) return nullptr;
  PyObject* box = PyDict_GetItemWithError(g_boxes, key);  // borrowed
  Py_DECREF(key);
  if (!box) {
    if (PyErr_Occurred()) return nullptr;
    Py_RETURN_NONE;
  }
  if (Py_TYPE(box) != reinterpret_cast<PyTypeObject*>(g_box_type)) Py_RETURN_NONE;
  PyObject* logical = PyObject_GetAttr(box, s_logical);
  if (!logical) return nullptr;
  bool physical = logical == Py_None;
  Py_DECREF(logical);
  if (!physical) Py_RETURN_NONE;
  Py_INCREF(box);
  return box;
}

// plain_array's checks on the box itself: its dtype and its array's shape are t's.
PyObject* box_array_if_plain(const c10::TensorImpl* impl, PyObject* box) {
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

// The array of jax tensor `t` when t is its whole storage, row-major, in the box's dtype and shape,
// with no conj/neg bit (a new reference); Py_None (a new reference) otherwise; nullptr on error.
PyObject* plain_array(const at::Tensor& t) {
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (impl->device_type() != c10::DeviceType::PrivateUse1 || !impl->has_storage() || impl->storage_offset() != 0 ||
      !impl->is_contiguous() || impl->is_conj() || impl->is_neg()) {
    Py_RETURN_NONE;
  }
  PyObject* box = physical_box(impl);
  if (!box || box == Py_None) return box;
  PyObject* array = box_array_if_plain(impl, box);
  Py_DECREF(box);
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
  if (!check_ready() || !drop_dead_boxes()) return nullptr;
  if (!THPVariable_Check(obj)) Py_RETURN_NONE;
  try {
    return plain_array(THPVariable_Unpack(obj));
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

PyObject* plain_values(PyObject*, PyObject* args) {
  if (!check_ready() || !drop_dead_boxes()) return nullptr;
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


}  // namespace jaxdev_native
