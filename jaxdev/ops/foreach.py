"""Foreach ops as one XLA program per call: the multi-tensor steps of torch.optim.

On every device but CPU, torch.optim steps with foreach ops: Adam calls
`torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)`, `_foreach_addcdiv_(params, exp_avgs, denom,
step_sizes)` and five more, each over all of a model's parameters. PyTorch's kernel for a backend
that has none of its own (CompositeExplicitAutograd's slow path) loops over the lists and dispatches
one op per tensor: a step of a model with 100 parameters made about 1,000 jaxdev dispatches. Here one
call is one jitted program over every index:

* index i computes exactly what the per-tensor kernel computes for it: the very same jitted body
  (`kit.applied_body` of the function the kernel applies, or the op's fast bodies), so the results
  are bit-identical to the loop (tests/test_foreach.py);
* the Python numbers (a scalar, alpha, a scalar list: Adam's step sizes change every step) are one
  float64 argument of the program, not constants baked into it: one compile per list structure. Each is
  cast as the per-tensor kernel casts a number: to the index's dtype (add, sub), or kept unrounded in
  opmath where that kernel reads it so (mul, div, lerp's weight);
* an in-place op writes each result into its tensor's storage, and gives the old buffers to the program
  (XLA donation) when nothing else holds any of them (tensor.sole_holder);
* `_foreach_norm` (clip_grad_norm_'s per-gradient norms) runs linalg.vector_norm's own value function
  (formulas.vector_norm_value) for every tensor in one program.

Only where the loop would compute that: every tensor a jax tensor that is its whole storage, all
tensors of one index of the same floating dtype and shape, a single tensor argument (`_foreach_mul_(grads,
clip_coef)`) 0-dimensional and of every index's dtype, the numbers real (int of at most 2**53, or
float), the lists of equal length, and an in-place op's tensors on storages of their own (no argument
on another's storage). Anything else, a storage placed over a mesh, or a traced call (torch.compile)
takes PyTorch's own loop, redispatched to its CPU-key kernel (device-agnostic: it only calls the
per-tensor ops), with its checks and its errors.
"""

from __future__ import annotations

import jax
import numpy as np
import torch

from jaxdev import dtypes, tensor, tracing
from jaxdev.ops import kit
from jaxdev.ops.kit import foreach_replay, formulas
from jaxdev.ops.kit.tensor_lists import boxes as _boxes
from jaxdev.ops.kit.tensor_lists import may_take as _may_take
from jaxdev.ops.kit.tensor_lists import store as _store
from jaxdev.ops.kit.tensor_lists import wholes as _wholes
from jaxdev.ops.registry import DYNAMIC_NUMBERS, FAST_BODIES, KERNELS, aten, register

_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)
_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_EXACT_INT = 2**53  # an int beyond this is not exactly a float64: its rounding would differ


# --- what index i computes ---------------------------------------------------------------------------
# body(dtype, alpha_is_one) -> the jitted body the per-tensor kernel applies to operands of that floating
# dtype (it casts its leading tensor operands to the compute dtype; alpha or value it takes as given),
# or None where that kernel does something else.


def _binary(op, with_alpha=None, exact_numbers=None):
    """`exact_numbers`: the function the per-tensor kernel applies with exact numbers (mul, div: their
    kernels read a Python number unrounded; a number here arrives as a float64 0-dim operand)."""

    def body(dtype, alpha_is_one):
        if not alpha_is_one:  # add/sub's kernel: a + b * alpha (binary.add)
            return kit.applied_body(with_alpha, dtype, dtype, 2)
        if exact_numbers is not None:
            return kit.applied_body(exact_numbers, dtype, dtype, 2, exact_numbers=True)
        made = FAST_BODIES[op](dtype)
        return None if made is None else made[0]

    return body


def _ternary(fn, casts: int):
    return lambda dtype, alpha_is_one: kit.applied_body(fn, dtype, dtype, casts)


def _unary(op):
    def body(dtype, alpha_is_one):
        made = FAST_BODIES[op](dtype)
        return None if made is None or made[1] != dtype else made[0]

    return body


_BINARY = {
    "add": _binary(aten.add.Tensor, formulas.add_alpha),
    "sub": _binary(aten.sub.Tensor, formulas.sub_alpha),
    "mul": _binary(aten.mul.Tensor, exact_numbers=formulas.MUL),
    "div": _binary(aten.div.Tensor, exact_numbers=formulas.DIV),
    "maximum": _binary(aten.maximum.default),
    "minimum": _binary(aten.minimum.default),
}
_TERNARY = {
    "lerp": _ternary(formulas.lerp, 3),  # lerp(self, end, weight): a tensor weight is cast too
    # a number weight is not: lerp.Scalar reads a Python number unrounded (CPU's weight.to<opmath_t>())
    "lerp by number": _ternary(formulas.lerp_by_number, 2),
    "addcmul": _ternary(formulas.addcmul, 3),  # (self, tensor1, tensor2, value): value as given
    "addcdiv": _ternary(formulas.addcdiv, 3),
}
_UNARY_NAMES = [
    "abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1", "floor", "frac",
    "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal", "round", "rsqrt", "sigmoid", "sign",
    "sin", "sinh", "sqrt", "tan", "tanh", "trunc",
]  # fmt: skip


# --- one call ------------------------------------------------------------------------------------------
# A call's operands after self are slots: "L" a tensor list, "T" one tensor for every index, "N" one
# number for every index, "NL" a number list. Their kinds and the body's name key the program.


def _run(name: str, body, inplace: bool, selfs, slots: list, alpha=1):
    """The call done as one program, or None where PyTorch's loop must run it."""
    if not _may_take(selfs, inplace):
        return None
    n = len(selfs)
    alpha_is_one = type(alpha) in (int, float) and alpha == 1  # (a traced alpha: no Python bool)
    if not (alpha_is_one or _real_number(alpha)):
        return None
    arrays = _wholes(selfs)
    if any(a is None for a in arrays):
        return None
    kinds, numbers, other, shared = [], [], [], []
    for kind, value in slots:
        if kind == "L":
            column = _column(value, arrays)
            if column is None:
                return None
            other.append(column)
        elif kind == "T":
            one = tensor.plain_array(value)
            if one is None or one.ndim != 0 or any(a.dtype != one.dtype for a in arrays):
                return None
            shared.append(one)
        elif kind == "N":
            if not _real_number(value):
                return None
            numbers.append(value)
        else:  # "NL"
            if not isinstance(value, (list, tuple)) or len(value) != n or not all(map(_real_number, value)):
                return None
            numbers.extend(value)
        kinds.append(kind)
    if not alpha_is_one:
        numbers.append(alpha)
        kinds.append("alpha")
    array_dtypes = [a.dtype for a in arrays]  # read once: a jax array's dtype is a Python property
    computes = tuple(_COMPUTE.get(d) for d in array_dtypes)
    if any(c is None for c in computes) or any(
        body(dtypes.to_torch_dtype(d), alpha_is_one) is None for d in set(array_dtypes)
    ):
        return None  # not a floating dtype, or no per-tensor body for it: the loop computes it
    donate, boxes = False, None
    if inplace:
        # A tensor on another's storage (the same array object: this is each storage's whole array) would
        # show the loop's order; two storages sharing one immutable array (a clone) are sent there too.
        mine = {id(a) for a in arrays}
        if (
            len(mine) != n
            or any(id(b) in mine for column in other for b in column)
            or any(id(b) in mine for b in shared)
        ):
            return None
        boxes = _boxes(selfs)
        arrays.clear()  # sole_holder counts references: the boxes' own alone
        donate = len(tensor.sole_holders(boxes, range(n))) == n  # sole_holder's tests, inline (76 boxes an LM step)
        arrays = [b.array for b in boxes]
    program = _program(name, body, tuple(kinds), computes, donate)
    try:
        results = program(arrays, other, shared, _numbers_argument(numbers))
    except Exception:
        if donate and any(a.is_deleted() for a in arrays):  # it failed running, after the buffers went
            raise
        return None  # refused while tracing, before anything ran: the loop raises the kernel's own error
    if foreach_replay.LEARNING.runs is not None:  # the native kernel learns this call (kit/foreach_replay.py)
        programs = (_program(name, body, tuple(kinds), computes, flag) for flag in (False, True))
        foreach_replay.ran(*programs, numbers)
    if not inplace:
        return [tensor.wrap(r) for r in results]
    _store(selfs, boxes, results)
    return selfs


def _column(tensors, arrays: list):
    """The arrays of a tensor list argument, each of its index's shape and dtype; else None. (A function
    of its own, so no loop variable of _run keeps a reference to a self array: see tensor.sole_holder.)"""
    if not isinstance(tensors, (list, tuple)) or len(tensors) != len(arrays):
        return None
    column = _wholes(tensors)
    for b, a in zip(column, arrays):
        if b is None or b.shape != a.shape or b.dtype != a.dtype:
            return None
    return column


def _real_number(v) -> bool:
    """A float, an int a float64 holds exactly, or a float64 scalar traced into a fused eager program (a
    step size that changes every step: jaxdev/fused lifts them out of the program's key)."""
    return type(v) is float or (type(v) is int and -_EXACT_INT <= v <= _EXACT_INT) or tracing.is_traced(v)


def _numbers_argument(numbers: list):
    if any(map(tracing.is_traced, numbers)):
        return jax.numpy.stack([jax.numpy.asarray(n, jax.numpy.float64) for n in numbers])
    return np.asarray(numbers, np.float64)


# A floating dtype -> the dtype a number is rounded to before index i's body sees it: the per-tensor
# kernel passes a Python number as a weakly typed scalar, which meets the compute (opmath) dtype's
# operands first. Other dtypes are not computed here.
_COMPUTE = {dtypes.to_jax_dtype(d): kit.opmath(dtypes.to_jax_dtype(d)) for d in _FLOATS}


@kit.jitted(maxsize=1024, donate=lambda name, body, kinds, computes, donate: (0,) if donate else ())
def _program(name: str, body, kinds: tuple, computes: tuple, donate: bool):
    def run(selfs, lists, shared, numbers):
        out = []
        for i, s in enumerate(selfs):
            fn = body(dtypes.to_torch_dtype(s.dtype), "alpha" not in kinds)
            lst, one, k = iter(lists), iter(shared), 0
            args, tail = [s], []
            for kind in kinds:
                if kind == "L":
                    args.append(next(lst)[i])
                elif kind == "T":
                    args.append(next(one))
                elif kind == "N":
                    args.append(numbers[k].astype(computes[i]))
                    k += 1
                elif kind == "NL":
                    args.append(numbers[k + i].astype(computes[i]))
                    k += len(selfs)
                else:  # alpha, after the cast operands: in the tensor's dtype first (binary.rules.checked_alpha)
                    tail.append(numbers[k].astype(s.dtype).astype(computes[i]))
            out.append(fn(*args, *tail))
        return out

    return run


def _zeros(selfs):
    """_foreach_zero_: each tensor's storage holds zeros (zero_'s result), or None for the loop."""
    if not _may_take(selfs, inplace=True):
        return None
    arrays = [tensor.plain_array(t) for t in selfs]
    if (
        any(a is None for a in arrays)
        or any(a.dtype not in _COMPUTE for a in arrays)
        or len({id(a) for a in arrays}) != len(arrays)
    ):
        return None
    _store(selfs, _boxes(selfs), [kit.zeros(a.shape, a.dtype) for a in arrays])
    return selfs


# --- registration ------------------------------------------------------------------------------------


def _kernel(op, name: str, body, inplace: bool, kinds: tuple, has_alpha: bool):
    """The PrivateUse1 kernel of foreach overload `op`: one program, or PyTorch's loop."""
    slow = op._handle
    per_tensor = _number_overload(name, inplace, kinds, has_alpha)

    def kernel(self, *args, **kwargs):
        alpha = kwargs.get("alpha", 1) if has_alpha else 1
        if len(args) == len(kinds) and set(kwargs) <= {"alpha"}:
            done = _run(name, body, inplace, self, list(zip(kinds, args)), alpha)
            if done is not None:
                return None if inplace else done
            if per_tensor is not None and (tracing.is_traced(alpha) or _traced_numbers(kinds, args)):
                return _traced_loop(per_tensor, inplace, self, kinds, args, kwargs)
        return slow.redispatch_boxed(_CPU, self, *args, **kwargs)

    return kernel


# The per-tensor overload PyTorch's loop calls for a foreach call with numbers ("N", "NL", alpha):
# `t.mul_(s)` is mul_.Scalar, `t.add_(other, alpha=a)` add_.Tensor, `t.lerp_(end, weight)` lerp_.Scalar,
# `t.addcmul_(a, b, value)` addcmul_.default.
_PER_TENSOR_OVERLOAD = {"add": "Scalar", "sub": "Scalar", "mul": "Scalar", "div": "Scalar", "lerp": "Scalar"}


def _number_overload(name: str, inplace: bool, kinds: tuple, has_alpha: bool):
    if not has_alpha and "N" not in kinds and "NL" not in kinds:
        return None
    packet = getattr(aten, f"{name}_" if inplace else name)
    if has_alpha:
        return packet.Tensor
    return getattr(packet, _PER_TENSOR_OVERLOAD.get(name, "default"))


def _traced_numbers(kinds: tuple, args: tuple) -> bool:
    for kind, value in zip(kinds, args):
        if (kind == "N" and tracing.is_traced(value)) or (
            kind == "NL" and isinstance(value, (list, tuple)) and any(map(tracing.is_traced, value))
        ):
            return True
    return False


def _traced_loop(per_tensor, inplace: bool, selfs, kinds: tuple, args: tuple, kwargs: dict):
    """PyTorch's loop for a call whose numbers are traced: fused eager lifted them into its program's data
    (an optimizer's step sizes), and the call is not one program here (a storage over a mesh, a tensor
    that is not its whole storage). The dispatcher takes no tracer for a Scalar, so each index calls the
    per-tensor op's kernel itself, as fused eager's program calls a single-tensor step's (its kernel
    reads the number as data: registry.DYNAMIC_NUMBERS); the recorded call's checks ran when recorded."""
    kernel = KERNELS[per_tensor.name()]
    schema = per_tensor._schema.arguments[1 : 1 + len(kinds)]  # addcdiv's value is keyword-only
    out = []
    for i, s in enumerate(selfs):
        operands = [value[i] if kind in ("L", "NL") else value for kind, value in zip(kinds, args)]
        positional = [v for a, v in zip(schema, operands) if not a.kwarg_only]
        named = {a.name: v for a, v in zip(schema, operands) if a.kwarg_only}
        out.append(kernel(s, *positional, **named, **kwargs))  # kwargs: alpha
    return None if inplace else out


def _register_family(name: str, body, overloads: dict, alpha_overloads=()):
    for variant, inplace in ((f"_foreach_{name}_", True), (f"_foreach_{name}", False)):
        packet = getattr(aten, variant, None)
        for overload, kinds in overloads.items():
            if packet is None or overload not in packet.overloads():  # torch versions differ (no sub.Tensor)
                continue
            op = getattr(packet, overload)
            foreach_replay.replayed(op)  # replayed natively per key (kit/foreach_replay.py)
            register(op)(_kernel(op, name, body, inplace, kinds, overload in alpha_overloads))
            numbers = tuple(1 + i for i, kind in enumerate(kinds) if kind in ("N", "NL"))
            if overload in alpha_overloads:  # SGD's `_foreach_add_(params, grads, alpha=-lr)` under a schedule
                numbers += ("alpha",)
            if numbers:  # the program takes them as data: fused eager need not key on their values
                DYNAMIC_NUMBERS[op] = numbers


for _name in ("add", "sub"):
    _register_family(
        _name,
        _BINARY[_name],
        {"List": ("L",), "Scalar": ("N",), "ScalarList": ("NL",), "Tensor": ("T",)},
        alpha_overloads=("List", "Tensor"),
    )
for _name in ("mul", "div"):
    _register_family(_name, _BINARY[_name], {"List": ("L",), "Scalar": ("N",), "ScalarList": ("NL",), "Tensor": ("T",)})
for _name in ("maximum", "minimum"):
    _register_family(_name, _BINARY[_name], {"List": ("L",)})
_register_family("lerp", _TERNARY["lerp"], {"List": ("L", "L")})
_register_family("lerp", _TERNARY["lerp by number"], {"Scalar": ("L", "N"), "ScalarList": ("L", "NL")})
for _name in ("addcmul", "addcdiv"):
    _register_family(_name, _TERNARY[_name], {"Scalar": ("L", "L", "N"), "ScalarList": ("L", "L", "NL")})
for _name in _UNARY_NAMES:
    _per_tensor = getattr(aten, _name).default
    if _per_tensor in FAST_BODIES:
        _register_family(_name, _unary(_per_tensor), {"default": ()})


def _norms(tensors, ord, dtype):
    """_foreach_norm (clip_grad_norm_'s per-gradient norms): linalg.vector_norm of each tensor, as its
    kernel computes it, in one program; or None for the loop."""
    if dtype is not None or type(ord) not in (int, float) or not _may_take(tensors, inplace=False):
        return None
    arrays = [tensor.plain_array(t) for t in tensors]
    if any(a is None or a.dtype not in _COMPUTE for a in arrays):
        return None
    # The order's type stays in the key: x**2 (an integer power) and x**2.0 are computed differently.
    return [tensor.wrap(r) for r in _norm_program(type(ord), ord)(arrays)]


@kit.jitted(maxsize=64)
def _norm_program(kind: type, ord):
    def run(arrays):
        return [
            formulas.vector_norm_value(a, ord, tuple(range(a.ndim)), False, dtypes.to_torch_dtype(a.dtype))
            for a in arrays
        ]

    return run


@register(aten._foreach_norm.Scalar)
def foreach_norm(self, ord=2, dtype=None):
    done = _norms(self, ord, dtype)
    if done is None:
        return aten._foreach_norm.Scalar._handle.redispatch_boxed(_CPU, self, ord, dtype=dtype)
    return done


@register(aten._foreach_zero_.default)
def foreach_zero_(self):
    if _zeros(self) is None:
        return aten._foreach_zero_.default._handle.redispatch_boxed(_CPU, self)
    return None
