"""Which dtype an out= tensor may have, op by op, and PyTorch's words when it may not.

PyTorch decides this by how each op is built, not by one rule:
* TensorIterator ops (add, sqrt, where.ScalarOther...) cast their result into out= when the cast is
  safe (store_into's can_cast check), except those built as same-dtype unary ops (neg, floor, sign,
  gelu, clamp with numbers...): "Found dtype Double but expected Float";
* other structured ops (mm, softmax, tril, scatter, upsample) and the out= variants generated from a
  functional op (relu.out, flip.out, add.Scalar_out) take only the result's exact dtype: "Expected out
  tensor to have dtype float, but got double instead";
* some check in their own words (all/any, amax, dot, where, searchsorted, median...), and some
  structured reductions compute in the out= tensor's dtype (sum, mean, cumsum), so any dtype goes.

Which ops are structured, and which out= variants are generated, is read from PyTorch's own
native_functions.yaml (torchgen ships it in every torch wheel), once, and only when an out= tensor's
dtype differs from the result's, so the common call pays nothing. Without torchgen only the rules
kept here apply, and everything else takes a safe cast.
"""

from __future__ import annotations

import functools
import os

import torch

from jaxdev import dtypes


def check(out_op: str, functional: str, outs, results, args, *, otherwise_exact: bool = False) -> None:
    """Raise CPU's RuntimeError where an out= tensor of `outs` may not take its result of `results`
    (jax arrays or tensors), before any is written. `otherwise_exact`: an op no rule names takes only
    its result's dtype (the linalg kernels), rather than a safe cast."""
    for position, (out, value) in enumerate(zip(outs, results)):
        result = value.dtype if isinstance(value.dtype, torch.dtype) else dtypes.to_torch_dtype(value.dtype)
        if out.dtype != result:
            message = refusal(out_op, functional, position, out.dtype, result, args)
            if message is None and otherwise_exact and _rule(functional) is None:
                message = _exact(out.dtype, result)
            if message is not None:
                raise RuntimeError(message)


def check_exact(result: torch.dtype, out: torch.Tensor) -> None:
    """A structured kernel's out= of another dtype than its result's (gather, ...)."""
    if out.dtype != result:
        raise RuntimeError(_exact(out.dtype, result))


def refusal(out_op: str, functional: str, position: int, out: torch.dtype, result: torch.dtype, args) -> str | None:
    """CPU's error message for writing a `result`-dtype value into out= tensor number `position` of
    dtype `out` (they differ), or None where CPU casts. `out_op` and `functional` are the qualified
    names of the out= overload and of the functional op it derives from; `args` its arguments."""
    own = _rule(functional)
    if own is not None:
        return own(out, result, args, position)
    if functional in _SAME_DTYPE_UNARY:
        return f"Found dtype {dtypes.scalar_name(out)} but expected {dtypes.scalar_name(result)}"
    if _built_as(out_op.removeprefix("aten::")) in ("structured", "generated"):
        return _exact(out, result)
    return None


def _rule(functional: str):
    name = functional.removeprefix("aten::")
    return _OWN_WORDS.get(name, _OWN_WORDS.get(name.split(".")[0]))


def _exact(out: torch.dtype, result: torch.dtype) -> str:
    return (
        f"Expected out tensor to have dtype {dtypes.type_meta_name(result)}, but got "
        f"{dtypes.type_meta_name(out)} instead"
    )


# TensorIterator ops built by build_unary_op (check_all_same_dtype): the out= dtype must be the result's.
# Their overloads taking tensor bounds (clamp.Tensor) promote and cast like any TensorIterator op.
_SAME_DTYPE_UNARY = {
    f"aten::{name}"
    for name in [
        "abs",
        "bitwise_not",
        "ceil",
        "conj_physical",
        "floor",
        "frac",
        "neg",
        "round",
        "round.decimals",
        "sgn",
        "sign",
        "trunc",
        "gelu",
        "hardshrink",
        "softplus",
        "softshrink",
        "clamp",
        "clamp_min",
        "clamp_max",
        "hardsigmoid",
        "hardswish",
        "elu",
        "silu",
        "mish",
        "leaky_relu",
        "hardtanh",
    ]
}


@functools.cache
def _built_as_table() -> dict[str, str]:
    """out= overload name ("mm.out") -> "structured" (a structured kernel not built on TensorIterator),
    "iterator" (one that is) or "generated" (an out= variant generated from the functional op)."""
    try:
        import torchgen
        import yaml
    except ImportError:
        return {}
    path = os.path.join(os.path.dirname(torchgen.__file__), "packaged", "ATen", "native", "native_functions.yaml")
    try:
        with open(path) as f:
            entries = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, yaml.YAMLError):
        return {}
    table = {}
    for entry in entries:
        name = entry["func"].split("(", 1)[0]
        if entry.get("structured"):
            iterator = entry.get("structured_inherits") == "TensorIteratorBase"
            table[name] = "iterator" if iterator else "structured"
        for generated in str(entry.get("autogen", "")).split(","):
            if generated.strip():
                table[generated.strip()] = "generated"
    return table


def _built_as(out_op: str) -> str | None:
    return _built_as_table().get(out_op)


def _first_dtype(args) -> torch.dtype:
    return next(a.dtype for a in args if isinstance(a, torch.Tensor))


def _cpu_type(dtype: torch.dtype) -> str:
    return torch.empty(0, dtype=dtype).type()  # "torch.FloatTensor", as CPU's checked-argument messages


def _casts(out, result, args, position):
    return None  # computes in the out= dtype (sum, mean, cumsum): store_into's can_cast decides


def _bool_result(name):
    def rule(out, result, args, position):
        if out in (torch.bool, torch.uint8):
            return None
        return f"{name} only supports bool tensor for result, got: {dtypes.scalar_name(out)}"

    return rule


def _boolean_outputs(name):
    return lambda out, result, args, position: f"{name} does not support non-boolean outputs."


def _input_and_out(out, result, args, position):
    return (
        f"Expected the dtype for input and out to match, but got {dtypes.scalar_name(_first_dtype(args))} "
        f"for input's dtype and {dtypes.scalar_name(out)} for out's dtype."
    )


def _dot(out, result, args, position):
    return f"result dtype {dtypes.scalar_name(out)} does not match input dtype {dtypes.scalar_name(_first_dtype(args))}"


def _mv(out, result, args, position):
    mat, vec = args[0].dtype, args[1].dtype
    return (
        "addmv input tensors must have the same dtype, but got "
        f"{dtypes.scalar_name(out)}, {dtypes.scalar_name(mat)}, and {dtypes.scalar_name(vec)}"
    )


def _complex(out, result, args, position):
    return (
        f"Expected object of scalar type {dtypes.scalar_name(result)} but got scalar type "
        f"{dtypes.scalar_name(out)} for argument 'out'"
    )


def _searchsorted(out, result, args, position):
    return (
        "torch.searchsorted(): output tensor's dtype is wrong, it can only be Int(int32) or Long(int64) "
        "depending on whether out_int32 flag is True, but we got output tensor's dtype "
        f"{dtypes.scalar_name(out)} and out_int32 flag is {result == torch.int32}"
    )


def _histc(out, result, args, position):
    return (
        "torch.histogram: input tensor and hist tensor should have the same dtype, but got input "
        f"{dtypes.type_meta_name(_first_dtype(args))} and hist {dtypes.type_meta_name(out)}"
    )


def _median(out, result, args, position):
    if position == 0:
        return (
            "Expected tensor for 'values' to have the same type as tensor for argument #2 'self'; but type "
            f"{_cpu_type(out)} does not equal {_cpu_type(result)} (while checking arguments for median)"
        )
    return (
        "Expected tensor for argument #1 'indices' to have scalar type Long; but got "
        f"{_cpu_type(out)} instead (while checking arguments for median)"
    )


def _kthvalue(out, result, args, position):
    return (
        "output values must be of same type as input" if position == 0 else "output indices must be of scalar type Long"
    )


def _mode(out, result, args, position):
    part = "values" if position == 0 else "indices"
    return f"expected scalar type '{dtypes.scalar_name(result)}' but got '{dtypes.scalar_name(out)}' for {part} output"


def _logsumexp(out, result, args, position):
    if out.is_floating_point or out.is_complex:
        return None
    return f"logsumexp(): Expected floating point type for result tensor, but got: {dtypes.scalar_name(out)}"


def _words(text):
    return lambda out, result, args, position: text


def _safely_castable(prefix, names=("result",)):
    """CPU's linalg out= kernels that cast into any dtype the result reaches safely, and refuse others
    naming the output (`names`, by position)."""

    def rule(out, result, args, position):
        if torch.can_cast(result, out):
            return None
        name = names[min(position, len(names) - 1)]
        return (
            f"{prefix}: Expected {name} to be safely castable from {dtypes.scalar_name(result)} dtype, "
            f"but got {name} with dtype {dtypes.scalar_name(out)}"
        )

    return rule


def _ormqr(out, result, args, position):
    return (
        "torch.ormqr: Expected input and result to have the same dtype, but input has dtype"
        f"{dtypes.scalar_name(_first_dtype(args))} and result has dtype {dtypes.scalar_name(out)}"
    )


# functional op name, or its base name for every overload -> rule(out dtype, result dtype, args, output
# position) -> message or None
_OWN_WORDS = {
    "sum": _casts,
    "nansum": _casts,
    "mean": _casts,
    "prod": _casts,
    "cumsum": _casts,
    "cumprod": _casts,
    "pow": _casts,
    "all": _bool_result("all"),
    "any": _bool_result("any"),
    "amax": _input_and_out,
    "amin": _input_and_out,
    "dot": _dot,
    "vdot": _dot,
    "mv": _mv,
    "masked_select": _words("masked_select(): self and result must have the same scalar type"),
    "heaviside": _words("heaviside is not yet implemented for tensors with different dtypes."),
    "where": lambda out, result, args, position: (
        f"Expected out type to be {dtypes.scalar_name(result)} but got {dtypes.scalar_name(out)}"
    ),
    "complex": _complex,
    "polar": _complex,
    "multinomial": lambda out, result, args, position: (
        f"multinomial expects Long tensor out, got: {dtypes.scalar_name(out)}"
    ),
    "histc": _histc,
    "searchsorted": _searchsorted,
    "bucketize": _searchsorted,
    "hash_tensor": lambda out, result, args, position: (
        f"Expected result to be of dtype uint64, but got {dtypes.scalar_name(out)}"
    ),
    "isneginf": _boolean_outputs("isneginf"),
    "isposinf": _boolean_outputs("isposinf"),
    "signbit": _boolean_outputs("signbit"),
    "nan_to_num": lambda out, result, args, position: (
        f"nan_to_num: dtype of out: {dtypes.scalar_name(out)} should be same as input: "
        f"{dtypes.scalar_name(_first_dtype(args))}"
    ),
    "log_sigmoid_forward": lambda out, result, args, position: (
        f"expected scalar type {dtypes.scalar_name(_first_dtype(args))} but found {dtypes.scalar_name(out)}"
    ),
    "sort": lambda out, result, args, position: _exact(out, result),  # sort.values runs the structured sort_stable
    "median.dim": _median,
    "nanmedian.dim": _median,
    "kthvalue": _kthvalue,
    "mode": _mode,
    "logsumexp": _logsumexp,
    # linalg (jaxdev/ops/lapack.py's out= kernels; any other linalg op takes only its result's dtype)
    "cholesky": _safely_castable("cholesky"),
    "cholesky_inverse": _safely_castable("cholesky_inverse"),
    "linalg_householder_product": _safely_castable("torch.linalg.householder_product"),
    "linalg_eig": _safely_castable("torch.linalg.eig", ("eigenvalues", "eigenvectors")),
    "geqrf": _casts,
    "linalg_lstsq": _casts,
    "linalg_matrix_exp": _casts,
    "ormqr": _ormqr,
    "linalg_solve_triangular": lambda out, result, args, position: (
        f"expected scalar type {dtypes.scalar_name(result)} but found {dtypes.scalar_name(out)}"
    ),
}
