// torch.optim's foreach calls replayed without a Python frame (issue 37 items 4 and 6).
//
// AdamW(foreach=True) makes eight foreach calls a step on the jax device (_foreach_lerp_, _foreach_mul_
// twice, _foreach_addcmul_, _foreach_sqrt, _foreach_div_, _foreach_add_, _foreach_addcdiv_), SGD with
// momentum two to five, each over every parameter. jaxdev/ops/foreach.py runs each as one jitted program;
// its Python kernel cost 2-3x that program's own call on the LM's 76 parameters (the dispatcher boxing
// the lists into Python, then the lists' checks, reads, donation tests and stores, tensor by tensor).
//
// register_foreach_kernel(name, slow, inplace) makes aten::`name`'s PrivateUse1 kernel a C++ one that
// keys each call by everything foreach.py's _run decides from: each tensor of each list (dtype, device,
// sizes; each must be what _run reads whole without a program: its storage's plain Box holding a
// physical jax array of its shape and dtype, contiguous from offset 0, no conj/neg bit), each number's
// kind (a float, or an int a float64 holds exactly: their values are the program's data, not its key),
// whether alpha is 1, whether inference mode is on, and fused_context.cpp's context. A key met before
// replays what _run did for it: its program (donating the selfs' buffers or not, decided per call as
// _run decides it: tensor.sole_holders) on the arrays and the numbers (one float64 array), its results
// stored into the selfs' boxes with their version counters bumped (in place), or made new tensors.
// A call the key cannot say (a storage over a mesh, inside a trace, a view), an in-place call whose
// aliasing _run refuses (two selfs on one array, another argument on a self's array), and a program that
// raises before anything ran (its buffers still there) run the Python kernel: it decides as it always has.
//
// Built in the same translation unit as memo_ops.cpp (put, current_context, g_array_type,
// g_memo_sharded) and fused_flush.cpp (slot_of), after them; foreach_learn.cpp holds its Python side.

#include "native.h"

#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/TensorImpl.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/library.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

namespace jaxdev_native {

namespace {

struct ForeachEntry {
  PyObject* keep;     // program(selfs, lists, shared, numbers) (owned)
  PyObject* donate;   // the same program donating argument 0, the selfs' buffers (owned)
  PyObject* context;  // owned: the context keyed (its address is in the key)
  std::vector<PyObject*> dtypes;  // out of place: each result's torch.dtype (owned)
};

struct ForeachOp {
  c10::OperatorHandle slow;
  bool inplace;
  int alpha;  // the index of the alpha argument, or -1
  std::unordered_map<std::string, ForeachEntry*> entries;
};

// One call as keyed: the arrays of its tensors by argument, the selfs' boxes (all owned), its numbers
// in the order _run passes them.
struct ForeachCall {
  std::string key;
  std::vector<PyObject*> selfs, boxes, shared;
  std::vector<std::vector<PyObject*>> lists;
  std::vector<double> numbers;

  ForeachCall() = default;
  ForeachCall(const ForeachCall&) = delete;
  ForeachCall& operator=(const ForeachCall&) = delete;
  ~ForeachCall() {
    for (auto* v : {&selfs, &boxes, &shared}) {
      for (PyObject* o : *v) Py_DECREF(o);
    }
    for (auto& list : lists) {
      for (PyObject* o : list) Py_DECREF(o);
    }
  }
};

// A call being learned: pushed around the slow path, filled by foreach_learn.
struct ForeachFrame {
  int op;
  std::string key;
  std::vector<double> numbers;  // the numbers the key read: the Python kernel's must be the same
  size_t tensors;               // the selfs' count
  bool taken = false;
  ForeachEntry* learned = nullptr;
};

enum class Outcome { kDone, kSlow, kRaise };

std::vector<ForeachOp*> g_foreach_ops;
std::unordered_map<const void*, int>* g_foreach_index = new std::unordered_map<const void*, int>;
thread_local std::vector<ForeachFrame>* t_foreach_frames = nullptr;
bool g_foreach_replay = true;         // foreach_replay(False): every call runs the Python kernel
PyObject* g_exported = nullptr;       // boxes.EXPORTED: arrays seen outside jaxdev, never donated
PyObject* g_boxes_globals = nullptr;  // jaxdev.core.boxes's namespace: its _tracing (scratch depth)
PyObject* g_asarray = nullptr;        // numpy.asarray
PyObject* g_float64 = nullptr;        // numpy.float64
PyObject* s_tracing = nullptr;
PyObject* s_is_deleted = nullptr;
constexpr size_t kMaxForeachEntries = 1024;  // per op; past it the op's entries start over
constexpr int64_t kExactInt = int64_t{1} << 53;  // foreach._EXACT_INT

void free_foreach_entry(ForeachEntry* e) {
  Py_XDECREF(e->keep);
  Py_XDECREF(e->donate);
  Py_XDECREF(e->context);
  for (PyObject* d : e->dtypes) Py_XDECREF(d);
  delete e;
}

// Whether a program or a VJP is being traced (tensor.in_scratch): _run leaves such calls to the loop.
bool in_scratch() {
  PyObject* depth = PyDict_GetItemWithError(g_boxes_globals, s_tracing);  // borrowed
  return !depth || PyLong_AsLong(depth) != 0;
}

// Tensor `t`'s part of the key, its Box's array (a new reference) into `arrays` and, where `boxes` is
// given, the Box too. False where _run's plain read (tensor_lists.wholes) would not give its array.
bool key_whole(const at::Tensor& t, std::string& key, std::vector<PyObject*>& arrays, std::vector<PyObject*>* boxes) {
  if (!t.defined()) return false;
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (impl->device_type() != c10::DeviceType::PrivateUse1 || !impl->has_storage() || impl->storage_offset() != 0 ||
      !impl->is_contiguous() || impl->is_conj() || impl->is_neg()) {
    return false;
  }
  PyObject* address = PyLong_FromVoidPtr(const_cast<void*>(impl->unsafe_storage().unsafeGetStorageImpl()->data()));
  PyObject* box = address ? PyDict_GetItemWithError(g_boxes, address) : nullptr;  // borrowed
  Py_XDECREF(address);
  if (!box || Py_TYPE(box) != reinterpret_cast<PyTypeObject*>(g_box_type) || slot_of(box, g_slots.logical) != Py_None) {
    return false;
  }
  c10::ScalarType type = impl->dtype().toScalarType();
  PyObject* array = slot_of(box, g_slots.array);
  if (slot_of(box, g_slots.dtype) != reinterpret_cast<PyObject*>(torch::getTHPDtype(type)) || !array ||
      reinterpret_cast<PyObject*>(Py_TYPE(array)) != g_array_type) {
    return false;
  }
  auto sizes = impl->sizes();
  PyObject* shape = PyObject_GetAttr(array, s_shape);
  bool same = shape && PyTuple_Check(shape) && PyTuple_GET_SIZE(shape) == static_cast<Py_ssize_t>(sizes.size());
  for (size_t i = 0; same && i < sizes.size(); i++) same = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i)) == sizes[i];
  Py_XDECREF(shape);
  if (!same || PyErr_Occurred()) return false;
  put(key, static_cast<int8_t>(type));
  put(key, static_cast<int8_t>(impl->device().index()));
  put(key, static_cast<int8_t>(sizes.size()));
  for (int64_t n : sizes) put(key, n);
  arrays.push_back(Py_NewRef(array));
  if (boxes) boxes->push_back(Py_NewRef(box));
  return true;
}

// A number's kind into the key, its value into `numbers`: a float, or an int a float64 holds exactly
// (foreach._real_number); false for anything else (a bool, a complex: the loop's).
bool key_number(const c10::IValue& v, std::string& key, std::vector<double>& numbers) {
  if (v.isDouble()) {
    key.push_back('d');
    numbers.push_back(v.toDouble());
    return true;
  }
  if (!v.isInt() || v.toInt() < -kExactInt || v.toInt() > kExactInt) return false;
  key.push_back('i');
  numbers.push_back(static_cast<double>(v.toInt()));
  return true;
}

// The self list's part of the key (argument 0).
bool key_selfs(const ForeachOp& op, const c10::IValue& v, bool inference, ForeachCall& c) {
  if (!v.isTensorList()) return false;
  auto list = v.toTensorList();
  if (list.empty()) return false;
  put(c.key, static_cast<uint32_t>(list.size()));
  for (const at::Tensor& t : list) {
    // an inference tensor written outside inference mode: the loop raises PyTorch's error
    if (op.inplace && !inference && t.defined() && t.is_inference()) return false;
    // an empty result is wrapped another way (tensor.wrap's strides for a size-0 dim)
    if (!op.inplace && t.defined() && t.numel() == 0) return false;
    if (!key_whole(t, c.key, c.selfs, op.inplace ? &c.boxes : nullptr)) return false;
  }
  return true;
}

// The call's key; false where some part cannot be keyed.
bool key_foreach(const ForeachOp& op, torch::jit::Stack* stack, size_t nargs, PyObject* context, ForeachCall& c) {
  put(c.key, reinterpret_cast<uintptr_t>(context));
  bool inference = c10::InferenceMode::is_enabled();
  c.key.push_back(inference ? 'I' : 'o');
  auto args = torch::jit::last(*stack, nargs);
  if (nargs == 0 || !key_selfs(op, args[0], inference, c)) return false;
  for (size_t a = 1; a < nargs; a++) {
    const c10::IValue& v = args[a];
    if (v.isTensorList()) {
      auto list = v.toTensorList();
      if (list.size() != c.selfs.size()) return false;
      c.key.push_back('L');
      c.lists.emplace_back();
      for (const at::Tensor& t : list) {
        if (!key_whole(t, c.key, c.lists.back(), nullptr)) return false;
      }
    } else if (v.isTensor()) {
      c.key.push_back('T');
      if (!key_whole(v.toTensor(), c.key, c.shared, nullptr)) return false;
    } else if (static_cast<int>(a) == op.alpha && ((v.isInt() && v.toInt() == 1) || (v.isDouble() && v.toDouble() == 1.0))) {
      c.key.push_back('1');  // alpha 1: no alpha operand (another body)
    } else if (v.isList()) {  // a number per tensor
      auto numbers = v.toListRef();
      if (numbers.size() != c.selfs.size()) return false;
      c.key.push_back('S');
      for (const c10::IValue& x : numbers) {
        if (!key_number(x, c.key, c.numbers)) return false;
      }
    } else if (!key_number(v, c.key, c.numbers)) {
      return false;
    }
  }
  return true;
}

// _run's aliasing test for an in-place call: every self on an array of its own, no other argument on a
// self's array.
bool apart(const ForeachCall& c) {
  std::vector<PyObject*> mine(c.selfs);
  std::sort(mine.begin(), mine.end());
  if (std::adjacent_find(mine.begin(), mine.end()) != mine.end()) return false;
  for (PyObject* a : c.shared) {
    if (std::binary_search(mine.begin(), mine.end(), a)) return false;
  }
  for (const auto& list : c.lists) {
    for (PyObject* a : list) {
      if (std::binary_search(mine.begin(), mine.end(), a)) return false;
    }
  }
  return true;
}

// tensor.sole_holders for a self's array: no reference but its box's (and the call's own, in c.selfs),
// never exported (its buffer may have an alias no count sees). Logical values, tracers and sharded
// storages never get here (key_whole, the sharded test before keying).
bool sole_holder(PyObject* array) {
  if (Py_REFCNT(array) != 2) return false;
  if (!g_exported || PyDict_GET_SIZE(g_exported) == 0) return true;
  PyObject* id = PyLong_FromVoidPtr(array);
  PyObject* ref = id ? PyDict_GetItemWithError(g_exported, id) : nullptr;  // borrowed
  Py_XDECREF(id);
  if (PyErr_Occurred()) return false;
  return !ref || !PyWeakref_Check(ref) || PyWeakref_GetObject(ref) != array;
}

PyObject* list_of(const std::vector<PyObject*>& items) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(items.size()));
  for (size_t i = 0; list && i < items.size(); i++) PyList_SET_ITEM(list, i, Py_NewRef(items[i]));
  return list;
}

// np.asarray(numbers, np.float64), as foreach._numbers_argument makes it.
PyObject* numbers_array(const std::vector<double>& numbers) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(numbers.size()));
  for (size_t i = 0; list && i < numbers.size(); i++) {
    PyObject* x = PyFloat_FromDouble(numbers[i]);
    if (!x) return Py_DECREF(list), nullptr;
    PyList_SET_ITEM(list, i, x);
  }
  if (!list) return nullptr;
  PyObject* args[2] = {list, g_float64};
  PyObject* out = PyObject_Vectorcall(g_asarray, args, 2, nullptr);
  Py_DECREF(list);
  return out;
}

// The program called as _run calls it: (selfs, [each list], [each shared tensor], numbers).
PyObject* call_program(PyObject* program, const ForeachCall& c) {
  PyObject* args[4] = {list_of(c.selfs), PyList_New(static_cast<Py_ssize_t>(c.lists.size())), list_of(c.shared),
                       numbers_array(c.numbers)};
  bool ok = args[0] && args[1] && args[2] && args[3];
  for (size_t i = 0; ok && i < c.lists.size(); i++) {
    PyObject* list = list_of(c.lists[i]);
    ok = list != nullptr;
    if (ok) PyList_SET_ITEM(args[1], i, list);
  }
  PyObject* out = ok ? PyObject_Vectorcall(program, args, 4, nullptr) : nullptr;
  for (PyObject* a : args) Py_XDECREF(a);
  return out;
}

// tensor_lists.store: every self's version counter bumped, then each box given its result.
void store(const ForeachCall& c, const c10::List<at::Tensor>& selfs, PyObject* results) {
  for (const at::Tensor& t : selfs) torch::autograd::impl::bump_version(t);
  for (size_t i = 0; i < c.boxes.size(); i++) {
    PyObject* box = c.boxes[i];
    PyObject* writes = PyLong_FromLongLong(PyLong_AsLongLong(slot_of(box, g_slots.writes)) + 1);
    set_slot(box, g_slots.writes, writes ? writes : Py_NewRef(slot_of(box, g_slots.writes)));
    set_slot(box, g_slots.array, Py_NewRef(PySequence_Fast_GET_ITEM(results, i)));
    set_slot(box, g_slots.logical, Py_NewRef(Py_None));
  }
}

// The out-of-place results as new tensors; false (nothing pushed) where one cannot be made.
bool push_results(const ForeachEntry& e, PyObject* results, size_t nargs, torch::jit::Stack* stack) {
  c10::List<at::Tensor> made;
  made.reserve(e.dtypes.size());
  for (size_t i = 0; i < e.dtypes.size(); i++) {
    at::Tensor t = wrap_result(Py_NewRef(PySequence_Fast_GET_ITEM(results, i)), e.dtypes[i]);
    if (!t.defined()) return false;
    made.push_back(std::move(t));
  }
  torch::jit::drop(*stack, nargs);
  torch::jit::push(*stack, std::move(made));
  return true;
}

// What _run did for this key, done again. kRaise (the error set) where the program failed after its
// donated buffers went, as _run raises then.
Outcome replay(const ForeachOp& op, const ForeachEntry& e, const ForeachCall& c, size_t nargs, torch::jit::Stack* stack) {
  if (!op.inplace && e.dtypes.size() != c.selfs.size()) return Outcome::kSlow;
  bool donate = false;
  if (op.inplace) {
    if (!apart(c)) return Outcome::kSlow;
    donate = std::all_of(c.selfs.begin(), c.selfs.end(), sole_holder);
  }
  PyObject* out = call_program(donate ? e.donate : e.keep, c);
  if (!out) {
    if (!donate) return Outcome::kSlow;
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    bool deleted = false;
    for (size_t i = 0; !deleted && i < c.selfs.size(); i++) {
      PyObject* gone = PyObject_CallMethodNoArgs(c.selfs[i], s_is_deleted);
      deleted = gone == Py_True;
      Py_XDECREF(gone);
      PyErr_Clear();
    }
    PyErr_Restore(type, value, traceback);
    return deleted ? Outcome::kRaise : Outcome::kSlow;  // failed running, its buffers gone: _run raises
  }
  PyObject* results = PySequence_Fast(out, "foreach: a program's results");
  Py_DECREF(out);
  bool ok = results && static_cast<size_t>(PySequence_Fast_GET_SIZE(results)) == c.selfs.size();
  if (ok && op.inplace) {
    store(c, torch::jit::peek(*stack, 0, nargs).toTensorList(), results);
    torch::jit::drop(*stack, nargs);
  } else if (ok) {
    ok = push_results(e, results, nargs, stack);
  }
  Py_XDECREF(results);
  return ok ? Outcome::kDone : Outcome::kSlow;
}

}  // namespace

}  // namespace jaxdev_native
