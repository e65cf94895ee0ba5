// Declarations the translation units of jaxdev's native module share (see native.cpp for what the
// module does); each unit includes the PyTorch headers it uses itself, so that none parses them all. One concern per file: native.cpp (the module and its CPU redispatch kernels),
// boxes.cpp (storages and their boxes), cow.cpp (copy-on-write storages), readers.cpp (a tensor's array without Python), fast_ops.cpp
// (whole eager ops and clone in C++), memo_ops.cpp and memo_learn.cpp (commonest kernels replayed per key), foreach_ops.cpp and foreach_learn.cpp (foreach calls replayed per key), graph_inputs.cpp (a compiled graph's arguments), device.cpp (device guard, pinned-memory hooks, attention choice).

#pragma once

#include <Python.h>

namespace at {
class Tensor;
}
namespace c10 {
struct TensorImpl;
struct Allocator;
}
namespace torch {
class Library;
}

namespace jaxdev_native {

// --- boxes.cpp: storages and their boxes (tensor.BOXES, tensor.Box) ---------------------------------
extern PyObject* g_boxes;     // tensor.BOXES
extern PyObject* g_box_type;  // tensor.Box
extern PyObject* s_logical;
extern PyObject* s_array;
extern PyObject* s_dtype;
extern PyObject* s_shape;
extern PyObject* s_numel;
extern PyObject* s_weak;
extern PyObject* s_untyped;
extern PyObject* s_writes;
extern PyObject* g_zero;
bool drop_box(void* address);
void set_slot(PyObject* box, Py_ssize_t offset, PyObject* value);
void replace_weak(PyObject* box, PyObject* value);
bool drop_dead_boxes();
bool wrap_array(PyObject* array, PyObject* dtype, PyObject* address_obj, at::Tensor& out);
PyObject* new_box(PyObject* array, int64_t numel, PyObject* dtype, void* weak);
PyObject* wrap(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* new_storage(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* drop_dead(PyObject*, PyObject*);
PyObject* set_boxes(PyObject*, PyObject* const* args, Py_ssize_t nargs);

// --- cow.cpp: copy-on-write storages (Tensor._lazy_clone) ----------------------------------------
c10::Allocator* storage_allocator();
PyObject* lazy_clone(PyObject*, PyObject* arg);
PyObject* data_address(PyObject*, PyObject* arg);

// --- readers.cpp: a tensor's array without a Python frame -------------------------------------------
bool check_ready();
PyObject* physical_box(const c10::TensorImpl* impl);
PyObject* plain_array(const at::Tensor& t);
bool is_plain(const at::Tensor& t);
PyObject* plain_value(PyObject*, PyObject* obj);
PyObject* plain_values(PyObject*, PyObject* args);
PyObject* all_plain(PyObject*, PyObject* args);

// --- fast_ops.cpp: whole eager ops and clone without a Python frame ---------------------------------
PyObject* register_fast_kernel(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* register_clone_kernel(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* set_allocation(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* set_python_kernels(PyObject*, PyObject* flag);

// --- memo_ops.cpp, memo_learn.cpp: per-op eager's commonest kernels replayed per key ---------------
PyObject* memo_begin(PyObject*, PyObject* index);
PyObject* memo_learn(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* set_memo(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* register_memo_kernel(PyObject*, PyObject* const* args, Py_ssize_t nargs);

// --- foreach_ops.cpp, foreach_learn.cpp: torch.optim's foreach calls replayed per key ------------
PyObject* foreach_begin(PyObject*, PyObject* index);
PyObject* foreach_learn(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* set_foreach(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* foreach_replay(PyObject*, PyObject* on);
PyObject* register_foreach_kernel(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* forget_replays(PyObject*, PyObject*);

// --- fused_context.cpp: what fused eager's kernels read besides their arguments ----------------------
PyObject* current_context();
PyObject* fused_context(PyObject*, PyObject*);

// --- fused.cpp, fused_flush.cpp: fused eager's replay guard and flush loops ------------------------
bool same_layout(c10::TensorImpl* impl, PyObject* meta);
PyObject* fused_match(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* fused_guard(PyObject*, PyObject* key);
PyObject* fused_layout(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* fused_alive(PyObject*, PyObject* pending);
PyObject* fused_settle(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* fused_unwrite(PyObject*, PyObject* boxes);
bool set_class(PyObject* box, PyObject* type);
PyObject* input_slot(long long k);
PyObject* made_slot(PyObject* p, Py_ssize_t node, PyObject* node_obj, Py_ssize_t m, PyObject* m_obj);

// --- fused_results.cpp: a recorded op's results ----------------------------------------------------
PyObject* fused_plan(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* fused_results(PyObject*, PyObject* const* args, Py_ssize_t nargs);

// --- graph_inputs.cpp: a compiled graph's call, its per-argument loops ------------------------------
PyObject* graph_place(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* graph_arrays(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* graph_view(PyObject*, PyObject* const* args, Py_ssize_t nargs);

// --- graph_match.cpp: a compiled graph's call matched to a specialisation's layout ------------------
PyObject* graph_key(PyObject*, PyObject* const* args, Py_ssize_t nargs);
PyObject* graph_match(PyObject*, PyObject* const* args, Py_ssize_t nargs);

// --- device.cpp: the jax device's guard, hooks and attention choice ---------------------------------
PyObject* install_device_guard(PyObject*, PyObject*);
PyObject* install_hooks(PyObject*, PyObject*);
PyObject* install_attention_choice(PyObject*, PyObject*);

// --- native.cpp ---------------------------------------------------------------------------------
torch::Library& private_use1_kernels();

}  // namespace jaxdev_native
