// The Python side of the memo kernels (memo_ops.cpp): learning a key (memo_begin, memo_learn, called
// by jaxdev/ops/kit/memo.py around the Python kernel), and their setup (set_memo, register_memo_kernel).
// Built in the same translation unit as memo_ops.cpp, after it (native.cpp includes both).

#include "native.h"

namespace jaxdev_native {

namespace {

// The frame the slow path of op `index` runs in, when it is the innermost one and not yet taken.
Frame* open_frame(PyObject* index_obj, bool take) {
  long index = PyLong_AsLong(index_obj);
  if (PyErr_Occurred() || !t_frames || t_frames->empty()) return nullptr;
  Frame& f = t_frames->back();
  if (f.op != index || f.taken == take) return nullptr;
  return &f;
}

bool read_feeds(PyObject* plan, size_t narrays, Entry& e) {
  Py_ssize_t n = PyTuple_GET_SIZE(plan);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* item = PyTuple_GET_ITEM(plan, i);
    if (PyLong_Check(item)) {
      long arg = PyLong_AsLong(item);
      if (arg < 0 || static_cast<size_t>(arg) >= narrays) return false;
      e.feeds.push_back(Feed{static_cast<int>(arg), nullptr});
    } else if (PyTuple_Check(item) && PyTuple_GET_SIZE(item) == 1) {
      PyObject* constant = PyTuple_GET_ITEM(item, 0);
      Py_INCREF(constant);
      e.feeds.push_back(Feed{-1, constant});
    } else {
      return false;
    }
  }
  return true;
}

// Each give: ("w", index, dtype) | ("s", index, (dtype, shape, strides, perm)) | ("c", array, dtype) | ("n",) | ("i", int) |
// ("r", index).
bool read_gives(PyObject* gives, Entry& e) {
  Py_ssize_t n = PyTuple_GET_SIZE(gives);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* item = PyTuple_GET_ITEM(gives, i);
    if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) < 1 || !PyUnicode_Check(PyTuple_GET_ITEM(item, 0))) return false;
    const char* kind = PyUnicode_AsUTF8(PyTuple_GET_ITEM(item, 0));
    Py_ssize_t size = PyTuple_GET_SIZE(item);
    Give g{kind ? kind[0] : '?', 0, nullptr, nullptr};
    if ((g.kind == 'w' || g.kind == 's') && size == 3 && PyLong_Check(PyTuple_GET_ITEM(item, 1))) {
      g.index = static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(item, 1)));
      g.value = Py_NewRef(PyTuple_GET_ITEM(item, 2));
      bool laid = g.kind == 's' && PyTuple_Check(g.value) && PyTuple_GET_SIZE(g.value) == 4 &&
                  THPDtype_Check(PyTuple_GET_ITEM(g.value, 0));
      if (g.kind == 'w' ? !THPDtype_Check(g.value) : !laid) return Py_DECREF(g.value), false;
    } else if (g.kind == 'c' && size == 3 && THPDtype_Check(PyTuple_GET_ITEM(item, 2))) {
      g.array = Py_NewRef(PyTuple_GET_ITEM(item, 1));
      g.value = Py_NewRef(PyTuple_GET_ITEM(item, 2));
    } else if (g.kind == 'r' && size == 2 && PyLong_Check(PyTuple_GET_ITEM(item, 1))) {
      g.index = static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(item, 1)));
    } else if (g.kind == 'i' && size == 2 && PyLong_Check(PyTuple_GET_ITEM(item, 1))) {
      g.value = Py_NewRef(PyTuple_GET_ITEM(item, 1));
    } else if (g.kind != 'n' || size != 1) {
      return false;
    }
    e.gives.push_back(g);
  }
  return true;
}

}  // namespace

// memo_begin(index): the stored arrays of the tensor arguments the innermost frame keyed (a tuple),
// when that frame is op `index`'s and not yet taken (it is then taken); None otherwise.
PyObject* memo_begin(PyObject*, PyObject* index) {
  Frame* f = open_frame(index, true);
  if (!f) {
    if (PyErr_Occurred()) return nullptr;
    Py_RETURN_NONE;
  }
  f->taken = true;
  PyObject* out = PyTuple_New(f->arrays.size());
  if (!out) return nullptr;
  for (size_t i = 0; i < f->arrays.size(); i++) PyTuple_SET_ITEM(out, i, Py_NewRef(f->arrays[i]));
  return out;
}

// memo_learn(index, program, several, plan, gives): what the innermost frame's call did, entered under
// its key when the call returns. plan: per program argument, an int (that tensor argument's stored
// array) or (constant,); gives: per op return, as read_gives reads them.
PyObject* memo_learn(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 5 || !PyTuple_Check(args[3]) || !PyTuple_Check(args[4])) {
    PyErr_SetString(PyExc_TypeError, "memo_learn(index, program, several, plan: tuple, gives: tuple)");
    return nullptr;
  }
  Frame* f = open_frame(args[0], false);
  if (!f || f->learned) {
    if (PyErr_Occurred()) return nullptr;
    Py_RETURN_FALSE;
  }
  PyObject* context = current_context();
  if (!context) return nullptr;
  Entry* e = new Entry{Py_NewRef(args[1]), Py_NewRef(context), PyObject_IsTrue(args[2]) == 1, {}, {}};
  if (!read_feeds(args[3], f->arrays.size(), *e) || !read_gives(args[4], *e)) {
    free_entry(e);
    PyErr_SetString(PyExc_ValueError, "memo_learn: a plan or gives it cannot read");
    return nullptr;
  }
  f->learned = e;
  Py_RETURN_TRUE;
}

// set_memo(array_type, sharded): what the memo kernels read (see memo_ops.cpp).
PyObject* set_memo(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyType_Check(args[0]) || !PyDict_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "set_memo(array_type: type, sharded: dict)");
    return nullptr;
  }
  Py_XSETREF(g_array_type, Py_NewRef(args[0]));
  Py_XSETREF(g_memo_sharded, Py_NewRef(args[1]));
  Py_RETURN_NONE;
}

// Where the memo kernel of an op in namespace `ns` is registered: aten's PrivateUse1 library, or one
// made for `ns` (jaxdev_slow, where a fast kernel's slow path is a memo kernel), kept for the process.
torch::Library& kernels_of(const std::string& ns) {
  static std::unordered_map<std::string, torch::Library*> libraries;
  if (ns == "aten") return private_use1_kernels();
  auto found = libraries.find(ns);
  if (found != libraries.end()) return *found->second;
  auto* made = new torch::Library(torch::Library::IMPL, ns, c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  libraries[ns] = made;
  return *made;
}

c10::OperatorHandle handle_of(const std::string& qualified) {
  auto dot = qualified.find('.');
  return c10::Dispatcher::singleton().findSchemaOrThrow(qualified.substr(0, dot).c_str(),
                                                        dot == std::string::npos ? "" : qualified.substr(dot + 1).c_str());
}

// register_memo_kernel(name, slow) -> the op's index for memo_begin/memo_learn. `name` ("aten::addmm",
// "jaxdev_slow::add.Tensor") gets the memo kernel, `slow` ("jaxdev_memo::addmm") is its Python kernel.
PyObject* register_memo_kernel(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1])) {
    PyErr_SetString(PyExc_TypeError, "register_memo_kernel(name: str, slow: str)");
    return nullptr;
  }
  if (!check_ready() || !g_next_address || !g_array_type) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "jaxdev native: set_allocation/set_memo not called");
    return nullptr;
  }
  std::string name = PyUnicode_AsUTF8(args[0]);
  std::string slow = PyUnicode_AsUTF8(args[1]);
  auto colons = name.find("::");
  if (colons == std::string::npos) {
    PyErr_SetString(PyExc_ValueError, "register_memo_kernel: a qualified name (namespace::op)");
    return nullptr;
  }
  try {
    auto handle = handle_of(slow);
    auto op = handle_of(name);
    int index = static_cast<int>(g_memo_ops.size());
    g_memo_ops.push_back(new MemoOp{handle, {}});
    (*g_memo_index)[&op.schema()] = index;
    kernels_of(name.substr(0, colons))
        .impl(name.substr(colons + 2).c_str(), torch::CppFunction::makeFromBoxedFunction<&memo_kernel>());
    return PyLong_FromLong(index);
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
}

}  // namespace jaxdev_native
