// What fused eager's kernels read besides their arguments, as one tuple in every op's key
// (jaxdev/fused/context.py, its Python twin): (default dtype, deterministic algorithms, their warn_only,
// fill_uninitialized_memory, torch.get_num_threads(), float32 matmul precision, warn always). A kernel
// reads them when it runs (an empty tensor's NaN fill, which elements CPU's scalar tail computes, a
// matmul's passes, whether a warning is given again); fused eager runs it when the op is first met
// and replays that after.
//
//   fused_context()          the tuple now: the same object while nothing in it changed
//   current_context()        the same, borrowed, for the replay guard (fused.cpp)

#include "native.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <c10/core/DefaultDtype.h>
#include <c10/util/Exception.h>
#include <torch/csrc/DynamicTypes.h>

namespace jaxdev_native {

namespace {

struct ContextState {
  PyObject* dtype = nullptr;  // a THPDtype: immortal while torch is loaded
  bool deterministic = false, warn_only = false, fill = false, warn_always = false;
  int threads = 0;
  at::Float32MatmulPrecision precision = at::Float32MatmulPrecision::HIGHEST;

  bool operator==(const ContextState& o) const {
    return dtype == o.dtype && deterministic == o.deterministic && warn_only == o.warn_only && fill == o.fill &&
           threads == o.threads && precision == o.precision && warn_always == o.warn_always;
  }
};

ContextState g_state;
PyObject* g_context = nullptr;  // the tuple of g_state (owned)

// torch.get_float32_matmul_precision()'s words for it
const char* precision_name(at::Float32MatmulPrecision p) {
  switch (p) {
    case at::Float32MatmulPrecision::HIGHEST:
      return "highest";
    case at::Float32MatmulPrecision::HIGH:
      return "high";
    case at::Float32MatmulPrecision::MEDIUM:
      return "medium";
  }
  return "highest";
}

}  // namespace

// Borrowed; nullptr with an error set.
PyObject* current_context() {
  at::Context& ctx = at::globalContext();
  ContextState now;
  now.dtype = reinterpret_cast<PyObject*>(torch::getTHPDtype(at::get_default_dtype_as_scalartype()));
  now.deterministic = ctx.deterministicAlgorithms();
  now.warn_only = ctx.deterministicAlgorithmsWarnOnly();
  now.fill = ctx.deterministicFillUninitializedMemory();
  now.threads = at::get_num_threads();
  now.precision = ctx.float32MatmulPrecision();
  now.warn_always = c10::WarningUtils::get_warnAlways();
  if (g_context && now == g_state) return g_context;
  PyObject* made = Py_BuildValue("(OOOOisO)", now.dtype, now.deterministic ? Py_True : Py_False,
                                 now.warn_only ? Py_True : Py_False, now.fill ? Py_True : Py_False, now.threads,
                                 precision_name(now.precision), now.warn_always ? Py_True : Py_False);
  if (!made) return nullptr;
  Py_XDECREF(g_context);
  g_context = made;
  g_state = now;
  return g_context;
}

PyObject* fused_context(PyObject*, PyObject*) {
  PyObject* context = current_context();
  return context ? Py_NewRef(context) : nullptr;
}

}  // namespace jaxdev_native
