// jaxdev's native fast paths: the few steps of every eager op that cost microseconds in Python.
//
// Built on first use by jaxdev/native.py (one compiler call, against the torch that is installed)
// and optional: every function here has a Python twin that jaxdev uses when this module cannot be
// built. Each does exactly what its twin does, only without the Python frames:
//
//   register_cpu_kernels(names)  PrivateUse1 kernels that redispatch to CPU's kernel (view ops, whose
//                                CPU kernels write only metadata): a view costs what it costs on CPU.
//   wrap(array, dtype, address)  a contiguous jax tensor of `array`'s shape on a new storage named by a
//                                fake address, its Box (holding `array`)
//                                made and entered in BOXES: tensor.wrap's hot path. The storage
//                                tells when it dies (its data pointer's deleter), which removes its
//                                box at once (or, off the GIL, the next wrap or drop_dead() does):
//                                no weak-reference sweep needed.
//   new_storage(address, nbytes) a storage at a fake address that reports its death as wrap's do
//                                (tensor.new_storage: strided, empty and copied results).
//   drop_dead()                  remove the boxes of the storages wrap made that died on a thread
//                                without the GIL (the readers below do it first too: a dead result's
//                                buffer is free before the next op allocates, so a loop reuses it
//                                while it is hot; measured, a 1024x1024 expand().contiguous() loop
//                                76 -> 38 us).
//   set_boxes(BOXES, Box)        the storage -> Box dictionary that the readers below look in, and
//                                the Box class (a subclass, such as a storage slice's, is left to Python).
//   plain_value(t)               the jax.Array of a tensor that is its whole storage, row-major (the
//                                hot path of tensor.read), or None when it is anything else.
//   plain_values(args)           plain_value of every tensor in args, other values as they are, or
//                                None as soon as one tensor is not plain.
//   all_plain(args)              every tensor in args (and in lists/tuples among them) is contiguous
//                                with PyTorch's default strides (layout._plain).
//   register_fast_kernel(name, slow, tensors, bodies), set_allocation(addresses, checkpoint)
//                                a whole elementwise op in C++ for its common case (plain tensors of
//                                one dtype, default arguments), jaxdev's Python kernel for the rest.
//   register_clone_kernel(slow, reader, sharded)
//                                clone and .contiguous() in C++ when the result is contiguous: the
//                                same array for a plain tensor, one cached read program for a view.
//   install_device_guard()       the jax device's DeviceGuardImpl in C++, replacing the one PyTorch's
//                                Python-backend setup registers: that one asks Python for the device
//                                type on every guard call (19 calls for one small backward), and
//                                from noexcept functions, so a backward whose hook raised aborted the
//                                process (std::terminate) instead of raising.
//
//   install_attention_choice()   the jax device's answer to scaled_dot_product_attention's "which
//                                backend?" (a DispatchStub, reachable only from C++): PyTorch's
//                                overrideable fused op, which jaxdev/ops/attention.py computes in one
//                                program each way, where it applies; the math composite elsewhere.
//                                No Python twin: without this module attention takes the math path.
//
//   install_hooks()              the jax device's PrivateUse1 hooks in C++, registered before PyTorch's
//                                Python ones (a process has one): they answer what those answer, and
//                                give pinned host memory (Tensor.pin_memory, DataLoader(pin_memory=
//                                True)) and is_pinned(). Python twin: jaxdev/pinned.py's fallback.
//
// The CPython API is used directly (no pybind11): the module compiles in seconds.

#include <Python.h>
#include <structmember.h>

#include <ATen/Context.h>
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/core/TensorImpl.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Storage.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/python_variable.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

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

void redispatch_to_cpu(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
}

// Kept for the life of the process, as a TORCH_LIBRARY_IMPL block would be; made on first use.
torch::Library* g_cpu_kernels = nullptr;

torch::Library& private_use1_kernels() {
  if (!g_cpu_kernels) {
    g_cpu_kernels = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  }
  return *g_cpu_kernels;
}

PyObject* register_cpu_kernels(PyObject*, PyObject* names) {
  PyObject* seq = PySequence_Fast(names, "register_cpu_kernels takes a list of operator names");
  if (!seq) return nullptr;
  try {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
      const char* name = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i));
      if (!name) {
        Py_DECREF(seq);
        return nullptr;
      }
      private_use1_kernels().impl(name, torch::CppFunction::makeFromBoxedFunction<&redispatch_to_cpu>());
    }
  } catch (const std::exception& e) {
    Py_DECREF(seq);
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_DECREF(seq);
  Py_RETURN_NONE;
}

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

// As torch._C._construct_storage_from_data_pointer makes it: byte-sized, no allocator, not resizable
// (a resize goes through jaxdev's own resize_ kernel, which gives the tensor a new storage).
// The data pointer's deleter records the storage's death (storage_died).
at::Tensor make_tensor(const std::vector<int64_t>& sizes, int64_t numel, c10::ScalarType dtype, void* address) {
  auto meta = c10::scalarTypeToTypeMeta(dtype);
  c10::Device device(c10::DeviceType::PrivateUse1, 0);
  c10::DataPtr data(address, address, &storage_died, device);
  c10::Storage storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), numel * static_cast<int64_t>(meta.itemsize()), std::move(data),
      /*allocator=*/nullptr, /*resizable=*/false));
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
    PyObject* weak = *reinterpret_cast<PyObject**>(reinterpret_cast<char*>(box) + g_slots.weak);
    if (weak && PyLong_Check(weak)) {
      auto* impl = static_cast<c10::StorageImpl*>(PyLong_AsVoidPtr(weak));
      if (impl) c10::raw::weak_intrusive_ptr::decref(impl);
      Py_INCREF(Py_None);
      set_slot(box, g_slots.weak, Py_None);
    }
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
        /*allocator=*/nullptr, /*resizable=*/false));
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

// --- whole eager ops without a Python frame -----------------------------------------------------
//
// register_fast_kernel(name, slow, tensors, bodies) makes aten::`name`'s PrivateUse1 kernel a C++ one
// for the common case of an elementwise op: its first `tensors` arguments are plain jax tensors (whole
// storage, default strides, not empty) of one dtype, and every other argument is at its schema default.
// Then `bodies(dtype)` (asked once per dtype; None: never fast) is (the op's jitted body, called on the
// arrays, its result's dtype: a comparison's is bool); the result becomes the output tensor (contiguous: PyTorch lays out an elementwise result of plain inputs so). Anything else, or any exception, goes to `slow`, an operator
// of the same schema in namespace jaxdev_slow whose PrivateUse1 kernel is jaxdev's Python kernel: it
// computes the same thing, or raises PyTorch's error. Every 256 fast calls tensor._checkpoint runs (the
// sweeps and the executables' check that wrap runs after each result).

struct FastBody {
  PyObject* body;    // the jitted body (owned), or Py_None: this dtype is never fast
  PyObject* result;  // the result's torch.dtype (owned)
};

struct FastOp {
  c10::OperatorHandle slow;
  size_t tensors;
  PyObject* bodies;  // dtype -> None, or (jitted body, result dtype)
  std::unordered_map<int, FastBody> body_of_dtype;
};

// Keyed by the aten operator's schema, whose address is fixed for the life of the process.
std::unordered_map<const void*, FastOp*>* g_fast = new std::unordered_map<const void*, FastOp*>;
PyObject* g_next_address = nullptr;  // tensor._next_address, the fake addresses' counter
PyObject* g_checkpoint = nullptr;    // tensor._checkpoint
unsigned g_fast_calls = 0;

bool same_default(const c10::IValue& given, const std::optional<c10::IValue>& dflt) {
  if (!dflt) return false;
  const c10::IValue& d = *dflt;
  if (given.isNone() || d.isNone()) return given.isNone() && d.isNone();
  if (given.isInt() && d.isInt()) return given.toInt() == d.toInt();
  if (given.isBool() && d.isBool()) return given.toBool() == d.toBool();
  if (given.isDouble() && d.isDouble()) return given.toDouble() == d.toDouble();
  return false;
}

// The output tensor holding `result` (a new reference, stolen) at the next fake address: the tail of
// every native kernel. Every 256 of them, tensor._checkpoint runs. Undefined on failure.
at::Tensor wrap_result(PyObject* result, PyObject* dtype) {
  at::Tensor out;
  PyObject* address = result ? PyIter_Next(g_next_address) : nullptr;
  bool ok = result && address && wrap_array(result, dtype, address, out);
  Py_XDECREF(result);
  Py_XDECREF(address);
  if (!ok) return {};
  if (++g_fast_calls % 256 == 0) {
    PyObject* r = PyObject_CallNoArgs(g_checkpoint);
    if (!r) PyErr_Clear();  // the next Python wrap's checkpoint reports it
    Py_XDECREF(r);
  }
  return out;
}

// Runs `attempt` (the native path) with the GIL; its output replaces the op's `nargs` arguments on
// the stack, or, when it gives none (or throws), `slow` (the Python kernel) runs the op instead.
// Set by set_python_kernels (jaxdev/eager_modes.py): every native kernel takes its Python slow path, so
// that the fused and sync eager modes see every op (the fast paths would run it at once, unrecorded).
bool g_python_kernels = false;

template <typename Attempt>
void run_native(Attempt attempt, size_t nargs, const c10::OperatorHandle& slow, torch::jit::Stack* stack) {
  if (g_python_kernels) {
    slow.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
    return;
  }
  at::Tensor out;
  {
    PyGILState_STATE gil = PyGILState_Ensure();
    try {
      out = attempt();
    } catch (const std::exception&) {
      out = at::Tensor();  // the slow path meets the same condition and reports it
    }
    PyErr_Clear();
    PyGILState_Release(gil);
  }
  if (out.defined()) {
    torch::jit::drop(*stack, nargs);
    torch::jit::push(*stack, std::move(out));
    return;
  }
  slow.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
}

// The output of the fast path, or an undefined tensor when the op must take the slow one (no Python
// error is left set either way). Runs with the GIL held.
at::Tensor try_fast(FastOp& op, const c10::OperatorHandle& handle, torch::jit::Stack* stack) {
  const auto& schema = handle.schema();
  size_t nargs = schema.arguments().size();
  auto args = torch::jit::last(*stack, nargs);
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  for (size_t i = 0; i < nargs; i++) {
    const c10::IValue& v = args[i];
    if (i < op.tensors) {
      if (!v.isTensor()) return {};
      const at::Tensor& t = v.toTensor();
      if (!t.defined() || t.numel() == 0 || !is_plain(t)) return {};
      if (i == 0) dtype = t.scalar_type();
      else if (t.scalar_type() != dtype) return {};
    } else if (!same_default(v, schema.arguments()[i].default_value())) {
      return {};
    }
  }
  auto found = op.body_of_dtype.find(static_cast<int>(dtype));
  FastBody fast;
  if (found == op.body_of_dtype.end()) {
    PyObject* dtype_obj = reinterpret_cast<PyObject*>(torch::getTHPDtype(dtype));
    PyObject* got = PyObject_CallOneArg(op.bodies, dtype_obj);
    if (!got) {
      PyErr_Clear();
      return {};
    }
    if (PyTuple_Check(got) && PyTuple_GET_SIZE(got) == 2 && THPDtype_Check(PyTuple_GET_ITEM(got, 1))) {
      fast = {PyTuple_GET_ITEM(got, 0), PyTuple_GET_ITEM(got, 1)};
    } else {  // None, or anything else: this dtype is never fast
      fast = {Py_None, dtype_obj};
    }
    Py_INCREF(fast.body);
    Py_INCREF(fast.result);
    Py_DECREF(got);
    op.body_of_dtype[static_cast<int>(dtype)] = fast;  // keeps the references
  } else {
    fast = found->second;
  }
  if (fast.body == Py_None) return {};
  PyObject* body = fast.body;
  if (!drop_dead_boxes()) {
    PyErr_Clear();
    return {};
  }
  PyObject* arrays[8];
  size_t n = std::min<size_t>(op.tensors, 8);
  for (size_t i = 0; i < n; i++) {
    PyObject* a = plain_array(args[i].toTensor());
    if (!a || a == Py_None) {
      for (size_t j = 0; j < i; j++) Py_DECREF(arrays[j]);
      Py_XDECREF(a);
      PyErr_Clear();
      return {};
    }
    arrays[i] = a;
  }
  PyObject* result = PyObject_Vectorcall(body, arrays, n, nullptr);
  for (size_t i = 0; i < n; i++) Py_DECREF(arrays[i]);
  return wrap_result(result, fast.result);
}

void fast_kernel(const c10::OperatorHandle& handle, c10::DispatchKeySet, torch::jit::Stack* stack) {
  FastOp* op = g_fast->at(&handle.schema());
  run_native([&] { return try_fast(*op, handle, stack); }, handle.schema().arguments().size(), op->slow, stack);
}

PyObject* register_fast_kernel(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1]) || !PyLong_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "register_fast_kernel(name: str, slow: str, tensors: int, bodies)");
    return nullptr;
  }
  if (!check_ready() || !g_next_address) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "jaxdev native: set_allocation was not called");
    return nullptr;
  }
  std::string name = PyUnicode_AsUTF8(args[0]);  // "add.Tensor" (aten)
  std::string slow = PyUnicode_AsUTF8(args[1]);  // "jaxdev_slow::add.Tensor"
  long tensors = PyLong_AsLong(args[2]);
  if (tensors < 1 || tensors > 8) {
    PyErr_SetString(PyExc_ValueError, "register_fast_kernel: 1 to 8 tensor arguments");
    return nullptr;
  }
  try {
    auto dot = slow.find('.');
    auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(
        slow.substr(0, dot).c_str(), dot == std::string::npos ? "" : slow.substr(dot + 1).c_str());
    auto aten_dot = name.find('.');
    auto aten = c10::Dispatcher::singleton().findSchemaOrThrow(
        ("aten::" + name.substr(0, aten_dot)).c_str(),
        aten_dot == std::string::npos ? "" : name.substr(aten_dot + 1).c_str());
    Py_INCREF(args[3]);
    (*g_fast)[&aten.schema()] = new FastOp{handle, static_cast<size_t>(tensors), args[3], {}};
    private_use1_kernels().impl(name.c_str(), torch::CppFunction::makeFromBoxedFunction<&fast_kernel>());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

// --- clone and .contiguous() without a Python frame ---------------------------------------------
//
// register_clone_kernel(slow, reader, sharded): aten::clone's PrivateUse1 kernel for its common cases,
// a result that is contiguous (`.contiguous()` of anything; clone of a tensor with default strides):
// * a plain tensor (its whole storage): the result holds the very same array (arrays are immutable);
// * a view of a plain box: reader(tensor) (asked once per view geometry, kept in a dict keyed by
//   sizes, strides, offset, dtype and the box's numel and dtype) is (program, offset): the jitted
//   program reading it from the box's array as stored, called with (array, offset), and the offset as
//   a device scalar (tensor.offset_arg; None for offset 0); None: that geometry is never fast.
// Anything else (conj/neg bits, empty, other memory formats, a box holding a logical value, a storage
// slice's box, any storage placed over a mesh while `sharded` is non-empty) and any exception take
// `slow` (jaxdev_slow::clone), the Python kernel.

struct CloneOp {
  c10::OperatorHandle slow;
  PyObject* reader;   // tensor -> (jitted read program (stored, offset), offset argument) or None
  PyObject* sharded;  // tensor.SHARDED_ENTRIES (a dict): any entry sends every view to the slow path
  PyObject* readers;  // geometry tuple -> (program, offset argument) or None
};
CloneOp* g_clone = nullptr;

PyObject* geometry_key(const c10::TensorImpl* impl, PyObject* box) {
  auto sizes = impl->sizes();
  auto strides = impl->strides();
  size_t n = sizes.size();
  PyObject* numel = PyObject_GetAttr(box, s_numel);
  if (!numel) return nullptr;
  PyObject* dtype = PyObject_GetAttr(box, s_dtype);
  if (!dtype) {
    Py_DECREF(numel);
    return nullptr;
  }
  PyObject* key = PyTuple_New(2 * n + 4);
  if (!key) {
    Py_DECREF(numel);
    Py_DECREF(dtype);
    return nullptr;
  }
  for (size_t i = 0; i < n; i++) {
    PyTuple_SET_ITEM(key, i, PyLong_FromLongLong(sizes[i]));
    PyTuple_SET_ITEM(key, n + i, PyLong_FromLongLong(strides[i]));
  }
  PyTuple_SET_ITEM(key, 2 * n, PyLong_FromLongLong(impl->storage_offset()));
  PyTuple_SET_ITEM(key, 2 * n + 1, PyLong_FromLong(static_cast<long>(impl->dtype().toScalarType())));
  PyTuple_SET_ITEM(key, 2 * n + 2, numel);  // steals
  PyTuple_SET_ITEM(key, 2 * n + 3, dtype);  // steals
  for (size_t i = 0; i < 2 * n + 2; i++) {
    if (!PyTuple_GET_ITEM(key, i)) {
      Py_DECREF(key);
      return nullptr;
    }
  }
  return key;
}

// (read program, offset argument) for `self`, a view of `box`, or None (a new reference; nullptr:
// the slow path).
PyObject* view_program(const at::Tensor& self, PyObject* box) {
  PyObject* key = geometry_key(self.unsafeGetTensorImpl(), box);
  if (!key) return nullptr;
  PyObject* program = PyDict_GetItemWithError(g_clone->readers, key);  // borrowed
  if (program) {
    Py_INCREF(program);
  } else if (!PyErr_Occurred()) {  // first view of this geometry: ask Python, keep the answer
    PyObject* tensor = THPVariable_Wrap(self);
    program = tensor ? PyObject_CallOneArg(g_clone->reader, tensor) : nullptr;
    Py_XDECREF(tensor);
    if (program) {
      if (PyDict_Size(g_clone->readers) >= 4096) PyDict_Clear(g_clone->readers);  // many offsets: start over
      if (PyDict_SetItem(g_clone->readers, key, program) != 0) Py_CLEAR(program);
    }
  }
  Py_DECREF(key);
  return program;
}

// The clone's value (a new reference), or nullptr for the slow path (the caller clears any error).
PyObject* clone_value(const at::Tensor& self) {
  PyObject* array = plain_array(self);
  if (!array) return nullptr;
  if (array != Py_None) return array;  // a plain tensor: its clone holds the same immutable array
  Py_DECREF(array);
  if (PyDict_GET_SIZE(g_clone->sharded) != 0) return nullptr;
  const c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  PyObject* box = physical_box(impl);  // held across the Python calls below
  if (!box || box == Py_None) {
    Py_XDECREF(box);
    return nullptr;
  }
  PyObject* value = nullptr;
  PyObject* reader = view_program(self, box);
  if (reader && PyTuple_Check(reader) && PyTuple_GET_SIZE(reader) == 2) {
    PyObject* stored = PyObject_GetAttr(box, s_array);
    if (stored) {
      PyObject* call_args[2] = {stored, PyTuple_GET_ITEM(reader, 1)};
      value = PyObject_Vectorcall(PyTuple_GET_ITEM(reader, 0), call_args, 2, nullptr);
      Py_DECREF(stored);
    }
  }
  Py_XDECREF(reader);
  Py_DECREF(box);
  return value;
}

at::Tensor try_clone(torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 2);
  if (!args[0].isTensor()) return {};
  const at::Tensor& self = args[0].toTensor();
  if (!self.defined() || self.numel() == 0 || self.is_conj() || self.is_neg()) return {};
  const c10::TensorImpl* impl = self.unsafeGetTensorImpl();
  if (impl->device_type() != c10::DeviceType::PrivateUse1 || !impl->has_storage()) return {};
  auto format = args[1].isNone() ? c10::MemoryFormat::Preserve : args[1].toMemoryFormat();
  bool contiguous_result = format == c10::MemoryFormat::Contiguous ||
                           (format == c10::MemoryFormat::Preserve && is_plain(self));
  if (!contiguous_result) return {};
  if (!drop_dead_boxes()) return {};
  return wrap_result(clone_value(self), reinterpret_cast<PyObject*>(torch::getTHPDtype(self.scalar_type())));
}

void clone_kernel(const c10::OperatorHandle& handle, c10::DispatchKeySet, torch::jit::Stack* stack) {
  run_native([&] { return try_clone(stack); }, 2, g_clone->slow, stack);
}

PyObject* register_clone_kernel(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyUnicode_Check(args[0]) || !PyCallable_Check(args[1]) || !PyDict_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "register_clone_kernel(slow: str, reader, sharded: dict)");
    return nullptr;
  }
  if (!check_ready() || !g_next_address) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "jaxdev native: set_allocation was not called");
    return nullptr;
  }
  try {
    std::string slow = PyUnicode_AsUTF8(args[0]);  // "jaxdev_slow::clone"
    auto handle = c10::Dispatcher::singleton().findSchemaOrThrow(slow.c_str(), "");
    PyObject* readers = PyDict_New();
    if (!readers) return nullptr;
    Py_INCREF(args[1]);
    Py_INCREF(args[2]);
    g_clone = new CloneOp{handle, args[1], args[2], readers};
    private_use1_kernels().impl("clone", torch::CppFunction::makeFromBoxedFunction<&clone_kernel>());
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* set_allocation(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyIter_Check(args[0]) || !PyCallable_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "set_allocation(addresses: iterator, checkpoint: callable)");
    return nullptr;
  }
  Py_INCREF(args[0]);
  Py_XSETREF(g_next_address, args[0]);
  Py_INCREF(args[1]);
  Py_XSETREF(g_checkpoint, args[1]);
  Py_RETURN_NONE;
}

// What torch/csrc/acc's PythonDeviceGuard does, every answer fixed (one device, one default stream,
// no-op events), with the device type known here rather than asked of Python.
struct JaxDeviceGuard final : public c10::impl::DeviceGuardImplInterface {
  static c10::Device device() { return c10::Device(c10::DeviceType::PrivateUse1, 0); }
  static c10::Stream stream() { return c10::Stream(c10::Stream::DEFAULT, device()); }
  c10::DeviceType type() const override { return c10::DeviceType::PrivateUse1; }
  c10::Device exchangeDevice(c10::Device) const override { return device(); }
  c10::Device getDevice() const override { return device(); }
  void setDevice(c10::Device) const override {}
  void uncheckedSetDevice(c10::Device) const noexcept override {}
  c10::Stream getStream(c10::Device) const noexcept override { return stream(); }
  c10::Stream getNewStream(c10::Device, int) const override { return stream(); }
  c10::Stream exchangeStream(c10::Stream) const noexcept override { return stream(); }
  c10::DeviceIndex deviceCount() const noexcept override { return 1; }
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream&) const override {}
};

PyObject* install_device_guard(PyObject*, PyObject*) {
  static JaxDeviceGuard guard;
  c10::impl::DeviceGuardImplRegistrar(c10::DeviceType::PrivateUse1, &guard);
  Py_RETURN_NONE;
}

// --- pinned host memory: the jax device's hooks ---------------------------------------------------
//
// With jaxdev installed, jax is every process's current accelerator, and PyTorch asks its hooks for a
// pinned-memory allocator (pin_memory(), DataLoader(pin_memory=True), empty(pin_memory=True)) and
// whether a pointer is pinned (is_pinned()). The hooks torch/csrc/acc registers for a Python backend
// raise NotImplementedError for both, and hooks can be registered once per process: so these replace
// them, registered first. "Pinned" means allocated here: 64-byte aligned host memory, not page-locked
// (JAX's GPU client stages host buffers itself); what it buys is that jaxdev may hand the buffer to
// jax.device_put without copying it first, so on an accelerator `.to("jax", non_blocking=True)`
// returns while the transfer runs (jaxdev/pinned.py). The allocator is also the device's host
// allocator: torch.accelerator.empty_host_cache() reads that registry and crashed (a null pointer)
// while it was empty.
std::mutex g_pinned_mutex;
std::map<uintptr_t, size_t> g_pinned;  // start -> size of each live pinned block

void free_pinned(void* data) {
  {
    std::lock_guard<std::mutex> lock(g_pinned_mutex);
    g_pinned.erase(reinterpret_cast<uintptr_t>(data));
  }
  c10::free_cpu(data);
}

// Any address inside a live block, as CUDA answers for its pinned blocks.
bool is_pinned_address(const void* data) {
  if (data == nullptr) return false;
  const auto address = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> lock(g_pinned_mutex);
  auto block = g_pinned.upper_bound(address);
  if (block == g_pinned.begin()) return false;
  --block;
  return address < block->first + block->second;
}

struct JaxPinnedAllocator final : public at::HostAllocator {
  c10::DataPtr allocate(size_t nbytes) override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (nbytes == 0) return {nullptr, nullptr, &free_pinned, cpu};  // as CUDA's: nothing to pin
    void* data = c10::alloc_cpu(nbytes);
    {
      std::lock_guard<std::mutex> lock(g_pinned_mutex);
      g_pinned[reinterpret_cast<uintptr_t>(data)] = nbytes;
    }
    return {data, data, &free_pinned, cpu};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
  // Nothing is cached (a block goes back to the system when its storage dies) and there are no
  // streams to wait for, so the caching allocator's questions have nothing to do.
  bool record_event(void* data, void*, c10::Stream) override { return is_pinned_address(data); }
  void empty_cache() override {}
  at::HostStats get_stats() override { return {}; }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}
};

JaxPinnedAllocator& pinned_allocator() {
  static JaxPinnedAllocator allocator;
  return allocator;
}

// What torch/csrc/acc's PythonHooks answers (built, available, a primary context; the generator and
// pointer questions PyTorch's default raises for), plus the two pinned-memory answers.
// The device questions get the device guard's answers (one device, jax:0).
struct JaxHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  bool isPinnedPtr(const void* data) const override { return is_pinned_address(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &pinned_allocator(); }
  c10::DeviceIndex deviceCount() const override { return 1; }
  c10::DeviceIndex getCurrentDevice() const override { return 0; }
  void setCurrentDevice(c10::DeviceIndex device) const override { check_device(device); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override { return check_device(device); }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override { return check_device(device); }
  static c10::DeviceIndex check_device(c10::DeviceIndex device) {
    TORCH_CHECK(device == 0 || device == -1, "jax:", static_cast<int>(device),
                " is not a device jaxdev places tensors on: it uses jax:0 only");
    return 0;
  }
};

// True when installed; False when hooks were registered already (then PyTorch keeps those).
PyObject* install_hooks(PyObject*, PyObject*) {
  if (at::isPrivateUse1HooksRegistered()) Py_RETURN_FALSE;
  static JaxHooks hooks;
  at::RegisterPrivateUse1HooksInterface(&hooks);
  at::setHostAllocator(c10::DeviceType::PrivateUse1, &pinned_allocator());
  // is_pinned() answers False for a device PyTorch has not initialised, and only pin_memory() does
  // that: torch.empty(n, pin_memory=True).is_pinned() would say False. Our init does nothing.
  at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1);
  Py_RETURN_TRUE;
}

// --- scaled_dot_product_attention's backend ----------------------------------------------------
//
// sdp::SDPBackend's values (torch.nn.attention.SDPBackend): MATH is 0, OVERRIDEABLE 4.
constexpr int64_t kMathAttention = 0;
constexpr int64_t kOverrideableAttention = 4;

// The overrideable op's meta function (torch/_meta_registrations.py) takes 3- and 4-dim queries; its
// schema has no dropout mask to replay in the backward nor grouped-query heads: those, and batch or
// head dims that broadcast, stay on the math path, which handles (and checks) them all.
int64_t attention_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                         const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  if (!at::globalContext().userEnabledOverrideableSDP() || dropout_p != 0.0) return kMathAttention;
  // a mask with is_causal: CPU's flash path (4-dim inputs) applies both, its math path (3-dim inputs)
  // raises; so does jax's choice
  if (is_causal && attn_mask.has_value() && attn_mask->defined() && query.dim() == 3) return kMathAttention;
  if (query.is_nested() || key.is_nested() || value.is_nested()) return kMathAttention;
  const int64_t dims = query.dim();
  if ((dims != 3 && dims != 4) || key.dim() != dims || value.dim() != dims) return kMathAttention;
  for (int64_t d = 0; d < dims - 2; d++) {
    if (key.size(d) != query.size(d) || value.size(d) != query.size(d)) return kMathAttention;
  }
  if (key.size(-1) != query.size(-1) || value.size(-2) != key.size(-2)) return kMathAttention;
  const auto dtype = query.scalar_type();
  if (!at::isFloatingType(dtype) || key.scalar_type() != dtype || value.scalar_type() != dtype) return kMathAttention;
  if (attn_mask.has_value() && attn_mask->defined() && attn_mask->scalar_type() != at::kBool &&
      attn_mask->scalar_type() != dtype) {
    return kMathAttention;
  }
  return kOverrideableAttention;
}

PyObject* install_attention_choice(PyObject*, PyObject*) {
  at::native::_fused_sdp_choice_stub.set_privateuse1_dispatch_ptr(&attention_choice);
  Py_RETURN_NONE;
}

PyObject* set_python_kernels(PyObject*, PyObject* flag) {
  int on = PyObject_IsTrue(flag);
  if (on < 0) return nullptr;
  g_python_kernels = on != 0;
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"set_python_kernels", set_python_kernels, METH_O, "every native kernel takes its Python slow path (or not)"},
    {"install_attention_choice", install_attention_choice, METH_NOARGS,
     "scaled_dot_product_attention's backend choice for the jax device"},
    {"install_device_guard", install_device_guard, METH_NOARGS, "the jax device's DeviceGuardImpl in C++"},
    {"register_cpu_kernels", register_cpu_kernels, METH_O, "PrivateUse1 kernels that redispatch to CPU"},
    {"wrap", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(wrap)), METH_FASTCALL,
     "a new contiguous jax tensor owning an array, its Box entered in BOXES"},
    {"new_storage", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(new_storage)), METH_FASTCALL,
     "a storage at a fake address that reports its death"},
    {"register_fast_kernel", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(register_fast_kernel)),
     METH_FASTCALL, "a C++ PrivateUse1 kernel for an elementwise op's common case"},
    {"register_clone_kernel", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(register_clone_kernel)),
     METH_FASTCALL, "a C++ PrivateUse1 kernel for clone's contiguous cases"},
    {"set_allocation", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(set_allocation)), METH_FASTCALL,
     "the fake addresses' counter and tensor._checkpoint, for the fast kernels"},
    {"drop_dead", drop_dead, METH_NOARGS, "remove the boxes of dead storages that wrap made"},
    {"set_boxes", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(set_boxes)), METH_FASTCALL,
     "the storage -> Box dictionary, and the Box class"},
    {"plain_value", plain_value, METH_O, "the array of a tensor that is its whole storage, else None"},
    {"plain_values", plain_values, METH_O, "plain_value of each tensor, or None"},
    {"all_plain", all_plain, METH_O, "every tensor contiguous with default strides"},
    {"install_hooks", install_hooks, METH_NOARGS, "the jax device's PrivateUse1 hooks, with pinned memory"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_jaxdev_native", nullptr, -1, methods};

}  // namespace

PyMODINIT_FUNC PyInit__jaxdev_native() {
  s_logical = PyUnicode_InternFromString("logical");
  s_array = PyUnicode_InternFromString("_array");
  s_dtype = PyUnicode_InternFromString("dtype");
  s_shape = PyUnicode_InternFromString("shape");
  s_numel = PyUnicode_InternFromString("numel");
  s_weak = PyUnicode_InternFromString("weak");
  s_untyped = PyUnicode_InternFromString("untyped");
  s_writes = PyUnicode_InternFromString("writes");
  g_zero = PyLong_FromLong(0);
  if (!s_logical || !s_array || !s_dtype || !s_shape || !s_numel || !s_weak || !s_untyped || !s_writes || !g_zero) {
    return nullptr;
  }
  return PyModule_Create(&module_def);
}
