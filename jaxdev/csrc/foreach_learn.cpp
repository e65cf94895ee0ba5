// The foreach kernels' dispatch and their Python side (foreach_ops.cpp replays): the kernel itself,
// learning a key (foreach_begin, foreach_learn: jaxdev/ops/kit/foreach_replay.py calls them around the
// Python kernel), their setup (set_foreach, register_foreach_kernel) and the switch benchmarks turn
// (foreach_replay). Built in the same translation unit as foreach_ops.cpp, after it.

#include "native.h"

#include <cstring>

namespace jaxdev_native {

namespace {

// Pops the frame pushed for the slow path; a frame that learned (and whose call returned) enters its
// entry under its key. Runs with the GIL.
void pop_foreach_frame(ForeachOp& op, bool returned) {
  ForeachFrame& f = t_foreach_frames->back();
  if (f.learned && returned) {
    if (op.entries.size() >= kMaxForeachEntries) {
      for (auto& kv : op.entries) free_foreach_entry(kv.second);
      op.entries.clear();
    }
    auto found = op.entries.find(f.key);
    if (found != op.entries.end()) free_foreach_entry(found->second);
    op.entries[f.key] = f.learned;
  } else if (f.learned) {
    free_foreach_entry(f.learned);
  }
  t_foreach_frames->pop_back();
}

// Keys the call and replays it where its key was met; else, where it was keyed, pushes the frame the
// slow path learns in (`framed`). Runs with the GIL; leaves no error set but kRaise's.
Outcome attempt(ForeachOp& op, int index, size_t nargs, torch::jit::Stack* stack, bool& framed) {
  ForeachCall c;
  Outcome outcome = Outcome::kSlow;
  bool keyed = false;
  try {
    PyObject* context = current_context();  // borrowed
    keyed = context && PyDict_GET_SIZE(g_memo_sharded) == 0 && !in_scratch() && drop_dead_boxes() &&
            key_foreach(op, stack, nargs, context, c);
    if (keyed) {
      auto found = op.entries.find(c.key);
      if (found != op.entries.end() && found->second->context == context) {
        outcome = replay(op, *found->second, c, nargs, stack);
      }
    }
  } catch (const std::exception&) {
    keyed = false;  // the slow path meets the same condition and reports it
    outcome = Outcome::kSlow;
  }
  if (outcome == Outcome::kRaise) return outcome;
  PyErr_Clear();
  if (keyed && outcome == Outcome::kSlow) {
    if (!t_foreach_frames) t_foreach_frames = new std::vector<ForeachFrame>;
    t_foreach_frames->push_back(ForeachFrame{index, std::move(c.key), std::move(c.numbers), c.selfs.size()});
    framed = true;
  }
  return outcome;
}

void foreach_kernel(const c10::OperatorHandle& handle, c10::DispatchKeySet, torch::jit::Stack* stack) {
  int index = g_foreach_index->at(&handle.schema());
  ForeachOp& op = *g_foreach_ops[index];
  const auto python = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);
  if (g_python_kernels || !g_foreach_replay) {
    op.slow.redispatchBoxed(python, stack);
    return;
  }
  bool framed = false;
  PyGILState_STATE gil = PyGILState_Ensure();
  Outcome outcome = attempt(op, index, handle.schema().arguments().size(), stack, framed);
  if (outcome == Outcome::kRaise) {
    python_error error;
    error.persist();
    PyGILState_Release(gil);
    throw error;
  }
  PyGILState_Release(gil);
  if (outcome == Outcome::kDone) return;
  try {
    op.slow.redispatchBoxed(python, stack);
  } catch (...) {
    if (framed) {
      gil = PyGILState_Ensure();
      pop_foreach_frame(op, false);
      PyGILState_Release(gil);
    }
    throw;
  }
  if (framed) {
    gil = PyGILState_Ensure();
    pop_foreach_frame(op, true);
    PyGILState_Release(gil);
  }
}

// The innermost frame, when it is op `index`'s and its `taken` is not `take`.
ForeachFrame* open_foreach_frame(PyObject* index_obj, bool take) {
  long index = PyLong_AsLong(index_obj);
  if (PyErr_Occurred() || !t_foreach_frames || t_foreach_frames->empty()) return nullptr;
  ForeachFrame& f = t_foreach_frames->back();
  return f.op == index && f.taken != take ? &f : nullptr;
}

// Whether the Python kernel's numbers (a float or an int each, in _run's order) are those keyed.
bool same_numbers(PyObject* given, const std::vector<double>& keyed) {
  if (!PyTuple_Check(given) || static_cast<size_t>(PyTuple_GET_SIZE(given)) != keyed.size()) return false;
  for (size_t i = 0; i < keyed.size(); i++) {
    PyObject* x = PyTuple_GET_ITEM(given, i);
    if (!PyFloat_CheckExact(x) && !PyLong_CheckExact(x)) return false;
    double v = PyFloat_CheckExact(x) ? PyFloat_AS_DOUBLE(x) : PyLong_AsDouble(x);
    if (PyErr_Occurred() || std::memcmp(&v, &keyed[i], sizeof v) != 0) return false;
  }
  return true;
}

}  // namespace

// foreach_begin(index) -> whether the innermost frame is op `index`'s and not yet taken (it then is).
PyObject* foreach_begin(PyObject*, PyObject* index) {
  ForeachFrame* f = open_foreach_frame(index, true);
  if (!f) {
    if (PyErr_Occurred()) return nullptr;
    Py_RETURN_FALSE;
  }
  f->taken = true;
  Py_RETURN_TRUE;
}

// foreach_learn(index, keep, donate, numbers, dtypes) -> whether the innermost frame learned: the
// programs _run chose between, the numbers it passed (a tuple: they must be the ones keyed), and the
// results' torch dtypes (out of place; () in place).
PyObject* foreach_learn(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 5 || !PyTuple_Check(args[3]) || !PyTuple_Check(args[4])) {
    PyErr_SetString(PyExc_TypeError, "foreach_learn(index, keep, donate, numbers: tuple, dtypes: tuple)");
    return nullptr;
  }
  ForeachFrame* f = open_foreach_frame(args[0], false);
  if (!f || f->learned) {
    if (PyErr_Occurred()) return nullptr;
    Py_RETURN_FALSE;
  }
  ForeachOp& op = *g_foreach_ops[f->op];
  Py_ssize_t made = PyTuple_GET_SIZE(args[4]);
  if (!same_numbers(args[3], f->numbers) || static_cast<size_t>(made) != (op.inplace ? 0 : f->tensors)) {
    PyErr_Clear();
    Py_RETURN_FALSE;
  }
  PyObject* context = current_context();
  if (!context) return nullptr;
  auto* e = new ForeachEntry{Py_NewRef(args[1]), Py_NewRef(args[2]), Py_NewRef(context), {}};
  for (Py_ssize_t i = 0; i < made; i++) {
    PyObject* dtype = PyTuple_GET_ITEM(args[4], i);
    if (!THPDtype_Check(dtype)) {
      free_foreach_entry(e);
      Py_RETURN_FALSE;
    }
    e->dtypes.push_back(Py_NewRef(dtype));
  }
  f->learned = e;
  Py_RETURN_TRUE;
}

// set_foreach(exported, boxes_namespace, asarray, float64): what the foreach kernels read besides the
// memo kernels' (set_memo).
PyObject* set_foreach(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 || !PyDict_Check(args[0]) || !PyDict_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "set_foreach(exported: dict, boxes_namespace: dict, asarray, float64)");
    return nullptr;
  }
  if (!s_tracing) s_tracing = PyUnicode_InternFromString("_tracing");
  if (!s_is_deleted) s_is_deleted = PyUnicode_InternFromString("is_deleted");
  if (!s_tracing || !s_is_deleted) return nullptr;
  Py_XSETREF(g_exported, Py_NewRef(args[0]));
  Py_XSETREF(g_boxes_globals, Py_NewRef(args[1]));
  Py_XSETREF(g_asarray, Py_NewRef(args[2]));
  Py_XSETREF(g_float64, Py_NewRef(args[3]));
  Py_RETURN_NONE;
}

// foreach_replay(on) -> the previous setting: off, every foreach call runs its Python kernel (the
// benchmarks' before, in the same process).
PyObject* foreach_replay(PyObject*, PyObject* on) {
  int flag = PyObject_IsTrue(on);
  if (flag < 0) return nullptr;
  PyObject* before = g_foreach_replay ? Py_True : Py_False;
  g_foreach_replay = flag != 0;
  return Py_NewRef(before);
}

// forget_replays() -> the entries dropped: every memo and foreach kernel's learned keys. A key holds
// no platform facts (refusals, the precision policy); when a process's platform changes under it
// (audit/deviceless.py's forget_platform: a stand-in becoming a TPU), what was learned before is not
// what the kernels would run now. Entries of frames being learned are entered as usual when they return.
PyObject* forget_replays(PyObject*, PyObject*) {
  size_t dropped = 0;
  for (MemoOp* op : g_memo_ops) {
    dropped += op->entries.size();
    for (auto& kv : op->entries) free_entry(kv.second);
    op->entries.clear();
  }
  for (ForeachOp* op : g_foreach_ops) {
    dropped += op->entries.size();
    for (auto& kv : op->entries) free_foreach_entry(kv.second);
    op->entries.clear();
  }
  return PyLong_FromSize_t(dropped);
}

// register_foreach_kernel(name, slow, inplace) -> the op's index for foreach_begin/foreach_learn.
// aten::`name` gets the C++ kernel; `slow` ("jaxdev_slow::_foreach_add_.List") is its Python kernel.
PyObject* register_foreach_kernel(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "register_foreach_kernel(name: str, slow: str, inplace: bool)");
    return nullptr;
  }
  if (!check_ready() || !g_next_address || !g_array_type || !g_asarray) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "jaxdev native: set_memo/set_foreach not called");
    return nullptr;
  }
  std::string name = PyUnicode_AsUTF8(args[0]);
  if (name.rfind("aten::", 0) != 0) {
    PyErr_SetString(PyExc_ValueError, "register_foreach_kernel: an aten operator (aten::op.overload)");
    return nullptr;
  }
  try {
    auto op = handle_of(name);
    int alpha = -1;
    const auto& arguments = op.schema().arguments();
    for (size_t i = 0; i < arguments.size(); i++) {
      if (arguments[i].name() == "alpha") alpha = static_cast<int>(i);
    }
    int index = static_cast<int>(g_foreach_ops.size());
    g_foreach_ops.push_back(new ForeachOp{handle_of(PyUnicode_AsUTF8(args[1])), PyObject_IsTrue(args[2]) == 1, alpha, {}});
    (*g_foreach_index)[&op.schema()] = index;
    private_use1_kernels().impl(name.substr(6).c_str(), torch::CppFunction::makeFromBoxedFunction<&foreach_kernel>());
    return PyLong_FromLong(index);
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

}  // namespace jaxdev_native
