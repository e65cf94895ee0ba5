// jaxdev's native fast paths: the few steps of every eager op that cost microseconds in Python.
//
// Built on first use by jaxdev/native.py (one compiler call, against the torch that is installed) and optional: every function here has a Python twin that jaxdev uses when this module
// cannot be built. Each does exactly what its twin does, only without the Python frames:
//
//   register_cpu_kernels(names)  PrivateUse1 kernels that redispatch to CPU's kernel (view ops, whose
//                                CPU kernels write only metadata): a view costs what it costs on CPU;
//                                view and as_strided unboxed (boxed_views(True) boxes them again).
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
//   lazy_clone(t)                t._lazy_clone() as PyTorch makes it: both storages share t's address
//                                copy-on-write (cow.cpp); None where it cannot be (Python clones).
//   data_address(storage)        its data pointer without materializing a copy-on-write storage (cow.cpp)
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
//   register_memo_kernel(name, slow), set_memo(array_type, sharded), memo_begin(index),
//   memo_learn(index, ...)       per-op eager's commonest kernels in C++ (memo_ops.cpp, memo_learn.cpp):
//                                a call keyed as met before replays the one program its Python
//                                kernel ran for that key (jaxdev/ops/kit/memo.py learns them).
//
//   register_foreach_kernel(name, slow, inplace), set_foreach(...), foreach_begin(index),
//   foreach_learn(index, ...), foreach_replay(on)
//                                torch.optim's foreach calls in C++ (foreach_ops.cpp, foreach_learn.cpp): a
//                                call keyed as met before replays its program and stores its results
//                                (jaxdev/ops/kit/foreach_replay.py learns them).
//
//   fused_context()              what fused eager's kernels read besides their arguments, the second part
//                                of every op's key (fused_context.cpp). Python twin: jaxdev/fused/context.py.
//   fused_match(seg, key, ...)   fused eager's replay guard (fused.cpp; jaxdev/fused/replay.py): an op
//                                call checked against the key the trie expects next, without building
//                                its key. Python twin: the recorder's full key.
//   fused_guard(key)             that key read once into C++ parts (fused_guard.cpp), which fused_match
//                                then walks instead of the key's tuples: the same answers.
//   fused_layout, fused_alive,   fused eager's flush over every input and pending storage (fused_flush.cpp):
//   fused_settle, fused_unwrite  program._layout, recorder._alive, boxes.settle and boxes.unwritten.
//   fused_plan, fused_results    a recorded op's results, written boxes and version bumps in one call
//                                (fused_results.cpp). Python twin: jaxdev/fused/results.py's own loops.
//
//   graph_place, graph_arrays,   a compiled graph's call over its arguments and outputs (graph_inputs.cpp):
//   graph_view                   Inputs' placement, Specialisation.run's arrays, outputs.on_storage's
//                                tensor. Python twins: the same loops, boxes.tensor_on_storage.
//   graph_key, graph_match       a specialisation's input layout compiled once, and a call matched to it
//                                in one pass (graph_match.cpp). Python twin: Inputs, its key and Guard.
//
//   install_hooks()              the jax device's PrivateUse1 hooks in C++, registered before PyTorch's
//                                Python ones (a process has one): they answer what those answer, and
//                                give pinned host memory (Tensor.pin_memory, DataLoader(pin_memory=
//                                True)) and is_pinned(). Python twin: jaxdev/capabilities/pinned.py's fallback.
//
// The CPython API is used directly (no pybind11): the module compiles in seconds. Its source files,
// one concern each, share native.h: this file (the module, its method table, and the CPU redispatch
// kernels; the PrivateUse1 library is made here, so the dispatcher names this file as where jaxdev's
// native kernels are registered), boxes.cpp, cow.cpp, readers.cpp, fast_ops.cpp, fused.cpp, fused_flush.cpp,
// fused_results.cpp, graph_inputs.cpp and device.cpp. They are built
// as one translation unit, included below (jaxdev/native.py compiles this file): compiled apart, each
// parsed PyTorch's headers again, 61 s of compiler time against 20 s for one unit.

#include "native.h"

#include "boxes.cpp"
#include "device.cpp"
#include "fast_ops.cpp"
#include "cow.cpp"  // after fast_ops.cpp: its copies take addresses from the same counter
#include "readers.cpp"
#include "fused_context.cpp"
#include "memo_ops.cpp"  // after fast_ops.cpp (wrap_result) and fused_context.cpp (current_context)
#include "memo_learn.cpp"
#include "fused_guard.cpp"  // before fused.cpp: its walk reads a compiled key
#include "fused.cpp"
#include "fused_flush.cpp"
#include "fused_results.cpp"
#include "graph_inputs.cpp"
#include "foreach_ops.cpp"  // after memo_ops.cpp (put, g_array_type) and fused_flush.cpp (slot_of)
#include "foreach_learn.cpp"
#include "graph_match.cpp"  // after graph_inputs.cpp: its placement helpers

#include <ATen/core/stack.h>
#include <ATen/ops/as_strided_ops.h>
#include <ATen/ops/view_ops.h>

#include <cstring>
#include <torch/library.h>

namespace jaxdev_native {

void redispatch_to_cpu(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
}

// The commonest of them unboxed: a training step's ~370 views and as_strideds (transpose, t, reshape,
// autograd's ViewBackward) then skip boxing their sizes into IValues and back. The same CPU kernel runs.
at::Tensor view_on_cpu(c10::DispatchKeySet, const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::_ops::view::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), self, size);
}

at::Tensor as_strided_on_cpu(c10::DispatchKeySet, const at::Tensor& self, c10::SymIntArrayRef size,
                             c10::SymIntArrayRef stride, std::optional<c10::SymInt> offset) {
  return at::_ops::as_strided::redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), self, size, stride,
                                          std::move(offset));
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
      if (std::strcmp(name, "view") == 0) {
        private_use1_kernels().impl(name, TORCH_FN(view_on_cpu));
      } else if (std::strcmp(name, "as_strided") == 0) {
        private_use1_kernels().impl(name, TORCH_FN(as_strided_on_cpu));
      } else {
        private_use1_kernels().impl(name, torch::CppFunction::makeFromBoxedFunction<&redispatch_to_cpu>());
      }
    }
  } catch (const std::exception& e) {
    Py_DECREF(seq);
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_DECREF(seq);
  Py_RETURN_NONE;
}

// benchmarks/fused_host.py's `--compare views`: while on, view and as_strided take the boxed redispatch
// again (a second library over the unboxed kernels; deleting it restores them).
torch::Library* g_boxed_views = nullptr;

PyObject* boxed_views(PyObject*, PyObject* flag) {
  int on = PyObject_IsTrue(flag);
  if (on < 0) return nullptr;
  try {
    if (on && !g_boxed_views) {
      g_boxed_views = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
      for (const char* name : {"view", "as_strided"}) {
        g_boxed_views->impl(name, torch::CppFunction::makeFromBoxedFunction<&redispatch_to_cpu>());
      }
    } else if (!on && g_boxed_views) {
      delete g_boxed_views;
      g_boxed_views = nullptr;
    }
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"set_python_kernels", set_python_kernels, METH_O, "every native kernel takes its Python slow path (or not)"},
    {"install_attention_choice", install_attention_choice, METH_NOARGS,
     "scaled_dot_product_attention's backend choice for the jax device"},
    {"install_device_guard", install_device_guard, METH_NOARGS, "the jax device's DeviceGuardImpl in C++"},
    {"register_cpu_kernels", register_cpu_kernels, METH_O, "PrivateUse1 kernels that redispatch to CPU"},
    {"boxed_views", boxed_views, METH_O, "view and as_strided through the boxed redispatch (a benchmark's baseline)"},
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
    {"register_memo_kernel", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(register_memo_kernel)),
     METH_FASTCALL, "a C++ PrivateUse1 kernel replaying an op's program per key"},
    {"set_memo", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(set_memo)), METH_FASTCALL,
     "jax's array class and the sharded storages, for the memo kernels"},
    {"memo_begin", memo_begin, METH_O, "the keyed arrays of the memo frame being learned, or None"},
    {"memo_learn", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(memo_learn)), METH_FASTCALL,
     "what the memo frame's call did, entered under its key when it returns"},
    {"register_foreach_kernel",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(register_foreach_kernel)), METH_FASTCALL,
     "a C++ PrivateUse1 kernel replaying a foreach call's program per key"},
    {"set_foreach", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(set_foreach)), METH_FASTCALL,
     "what the foreach kernels read: exported arrays, the boxes' namespace, numpy's asarray and float64"},
    {"foreach_begin", foreach_begin, METH_O, "whether the innermost foreach frame is this op's, to learn"},
    {"foreach_learn", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(foreach_learn)), METH_FASTCALL,
     "what the foreach frame's call did, entered under its key when it returns"},
    {"foreach_replay", foreach_replay, METH_O, "foreach calls replayed natively (True) or all in Python"},
    {"forget_replays", forget_replays, METH_NOARGS, "drop every memo and foreach kernel's learned keys"},
    {"lazy_clone", lazy_clone, METH_O, "t._lazy_clone() sharing t's storage copy-on-write, or None"},
    {"data_address", data_address, METH_O, "a storage's data pointer, leaving a copy-on-write one shared"},
    {"drop_dead", drop_dead, METH_NOARGS, "remove the boxes of dead storages that wrap made"},
    {"set_boxes", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(set_boxes)), METH_FASTCALL,
     "the storage -> Box dictionary, and the Box class"},
    {"plain_value", plain_value, METH_O, "the array of a tensor that is its whole storage, else None"},
    {"plain_values", plain_values, METH_O, "plain_value of each tensor, or None"},
    {"all_plain", all_plain, METH_O, "every tensor contiguous with default strides"},
    {"fused_context", fused_context, METH_NOARGS, "what fused eager's kernels read besides their arguments"},
    {"fused_match", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fused_match)), METH_FASTCALL,
     "whether an op call's key is a fused-eager trie child's; on a match, its effects on the segment"},
    {"fused_guard", fused_guard, METH_O, "a fused-eager trie child's key read once for its replay guard"},
    {"fused_layout", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fused_layout)), METH_FASTCALL,
     "a fused segment's inputs as its program takes them, or None"},
    {"fused_alive", fused_alive, METH_O, "whether each pending box's storage is still held"},
    {"fused_settle", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fused_settle)), METH_FASTCALL,
     "pending boxes given their values, plain Boxes again"},
    {"fused_unwrite", fused_unwrite, METH_O, "written boxes plain Boxes again"},
    {"fused_plan", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fused_plan)), METH_FASTCALL,
     "a recorded op's learned results read into a native plan, or None"},
    {"fused_results", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fused_results)), METH_FASTCALL,
     "a recorded op's results, written boxes and version bumps, as its plan says"},
    {"graph_place", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(graph_place)), METH_FASTCALL,
     "a compiled graph call's placement (graphs/inputs.py), or None"},
    {"graph_arrays", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(graph_arrays)), METH_FASTCALL,
     "boxes' physical arrays and whether each has its expected shape, or None"},
    {"graph_view", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(graph_view)), METH_FASTCALL,
     "a new jax tensor on a jax storage with the given layout, or None"},
    {"graph_key", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(graph_key)), METH_FASTCALL,
     "a compiled graph specialisation's input layout as a native key, or None"},
    {"graph_match", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(graph_match)), METH_FASTCALL,
     "a call's arrays, boxes and storages' first arguments where it has a native key's layout, or None"},
    {"install_hooks", install_hooks, METH_NOARGS, "the jax device's PrivateUse1 hooks, with pinned memory"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_jaxdev_native", nullptr, -1, methods};

}  // namespace jaxdev_native

PyMODINIT_FUNC PyInit__jaxdev_native() {
  using namespace jaxdev_native;
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
