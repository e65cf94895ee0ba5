"""Elementwise bodies run on tensors: `apply` (a body on tensors cast to a compute dtype, cast to the
result dtype, as TensorIterator casts), `on_views` (a jitted body reading strided views inside its
program), and the per-dtype bodies the registry's fast paths run (`typed_bodies`, `applied_body`)."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, native, tensor, tracing
from jaxdev.dtypes import opmath
from jaxdev.ops.kit import memo
from jaxdev.ops.kit.arguments import J
from jaxdev.ops.kit.cpu_numerics import narrowed, round_to
from jaxdev.ops.kit.half_results import rounded_to
from jaxdev.ops.kit.jit import jitted

Tensor = torch.Tensor


def applied_body(fn, compute: torch.dtype, result: torch.dtype, nargs: int, exact_numbers: bool = False):
    """The jitted body `apply(fn, compute, result, tensors, extra, exact_numbers)` runs for `nargs`
    tensors, for a kernel that composes it into a program of its own (jaxdev/ops/foreach.py): the same
    object, so the same computation."""
    return _cast_body(fn, compute, result, nargs, exact_numbers)


@jitted
def _cast_body(fn, compute: torch.dtype, result: torch.dtype, nargs: int, exact_numbers: bool = False):
    """`fn` on `nargs` operands cast as TensorIterator casts them: each to the common dtype `compute`, then
    to its opmath dtype for the arithmetic. So a Python number or a float32 0-dim tensor beside half
    tensors is rounded to half first, as CPU's kernels read it (`x == 1.0001` is True for a half x of 1).
    `exact_numbers`: the op's CPU kernel reads a number second operand (a CPU scalar: a Python number or
    a 0-dim tensor) unrounded, in opmath (mul and the divisions of reduced-precision floats). A Python
    number reaches the jitted body as a 0-dim float64 (or int64) array, as a foreach program's numbers do."""
    common = dtypes.to_jax_dtype(compute)
    wide, result = opmath(common), dtypes.to_jax_dtype(result)

    def operand(a, second):
        a = jnp.asarray(a)
        if exact_numbers and second and a.ndim == 0 and a.dtype != common:
            return a.astype(wide)
        return narrowed(a, common).astype(wide)  # a float64 number to a half through float, as c10 does

    def run(*args):
        cast = [operand(a, i == 1) for i, a in enumerate(args[:nargs])]
        with rounded_to(result):  # a bfloat16 result may take the platform's functions (half_results.py)
            return to_result(fn(*cast, *args[nargs:]), result)

    return run


_FLOAT16 = jnp.dtype(jnp.float16)


def to_result(v, result):
    """v, computed in opmath, as the result dtype. A float16 result is first rounded on float16's grid in
    v's own dtype (cpu_numerics.round_to: integer code on the bits), so that a following op widening it
    inside one traced program (a compiled graph, a fused segment) does not make a convert round trip,
    which LLVM narrows into float16 arithmetic on a CPU with AVX512-FP16 and fuses into the next op's
    sum (issue 41's hazard across ops: bilinear's compiled float16 backward was 6.4x the OpInfo
    tolerance there, 0 ulps off CPU under --xla_cpu_max_isa=AVX2). The same value: the convert after it
    is exact."""
    if result == _FLOAT16 and v.dtype in (jnp.float32, jnp.float64):
        v = round_to(result)(v)
    return v.astype(result)


def same_dtype_bodies(fn, nargs: int, when: Callable[[torch.dtype], bool]):
    """typed_bodies for `apply(fn, dtype, dtype, tensors)`, where `when(dtype)`."""
    return typed_bodies(fn, nargs, lambda dtype: (dtype, dtype) if when(dtype) else None)


def typed_bodies(fn, nargs: int, dtypes_of: Callable[[torch.dtype], tuple | None]):
    """For `register_functional(fast=...)`: dtype -> (what `apply(fn, compute, result, tensors)` runs on
    `nargs` plain tensors of that dtype, result), where `dtypes_of(dtype)` is (compute, result) as the
    Python kernel computes them, or None where that kernel does something else."""

    def bodies(dtype):
        chosen = dtypes_of(dtype)
        return None if chosen is None else (_cast_body(fn, chosen[0], chosen[1], nargs, False), chosen[1])

    return bodies


_PLAIN: dict = {}


def plain(fn):
    """`fn` as a plain function: jnp ufunc objects hash slowly, and `fn` keys the jit cache."""
    if type(fn).__name__ != "ufunc":
        return fn
    if fn not in _PLAIN:
        _PLAIN[fn] = lambda *args: fn(*args)
    return _PLAIN[fn]


def apply(fn, compute: torch.dtype, result: torch.dtype, tensors, extra=(), exact_numbers=False):
    """`fn` jitted on the tensors' values cast to `compute`, then to its opmath dtype, cast to `result`
    (_cast_body). `fn` must be a module-level function (or a `plain` ufunc): it keys the cache."""
    return on_views(_cast_body(fn, compute, result, len(tensors), exact_numbers), tensors, extra)


def on_views(body, args, extra=()):
    """`body(*values, *extra)` for the jitted `body`: `args` are tensors (or Python numbers, passed as
    they are). Strided views among them (x.t(), x[:, ::2], an expand) are read inside the same XLA
    program, where their transpose or slice fuses into the body, rather than materialised first."""
    if _plain_values is not None:
        values = _plain_values(args)
        if values is not None:  # the hot path: every tensor is its whole storage (natively checked)
            if _recording.calls is not None:  # a memo kernel is learning this call (kit/memo.py)
                return memo.record(body, values, extra)
            return body(*values, *extra)
    values, recipes, offsets = [], [], []
    for t in args:
        if isinstance(t, Tensor) and not t.is_cpu:
            array, offset, recipe = tensor.read_parts(t)
            values.append(array)
            if recipe is not None:
                offsets.append(len(values))
                values.append(offset)
            recipes.append(recipe)
        else:
            values.append(J(t) if isinstance(t, Tensor) else t)
            recipes.append(None)
    # every argument its whole storage: the body itself; else the views read inside its program
    program = _reading_views(body, tuple(recipes)) if offsets else body
    if _recording.calls is not None:
        return memo.record(program, values, extra, offsets)
    return program(*values, *extra)


# The hot path of on_views in one native call (jaxdev/native.py), when the module is in use.
_plain_values = native.module.plain_values if native.module is not None else None
_recording = memo.RECORDING


@jitted(maxsize=4096)
def _reading_views(body, recipes):
    def run(*args):
        values, i = [], 0
        for recipe in recipes:
            if recipe is None:
                values.append(args[i])
                i += 1
            else:
                values.append(tensor.view_value(recipe, args[i], args[i + 1]))
                i += 2
        return body(*values, *args[i:])

    return run


def unflattened(t) -> jax.Array | None:
    """Inside a traced program (fused eager's step, a compiled graph): the N-D array (N > 2) whose
    leading dims the 2-D jax tensor `t` flattens, where `t` is all of that array (`x.view(-1, k)` of a
    contiguous x, as F.linear hands a [batch, seq, k] input to addmm); None otherwise. A product over
    it keeps those dims apart, as a hand-written jax.jit step's does: the flattened [batch * seq, k]
    ties batch and seq together in every layout XLA's TPU compiler may pick for the product and its
    neighbours (issue 37: one GPT layer's step, 4.21 -> 3.53 M estimated cycles). Same values: a dot
    over the N-D array is the rows' dot (checked bit for bit on CPU)."""
    if not tensor.is_jax(t) or t.dim() != 2 or t.storage_offset() or not t.is_contiguous():
        return None
    if t.is_conj() or t.is_neg():
        return None
    box = tensor.box_of(t)
    if box.dtype is not t.dtype or box.numel != t.numel() or not tracing.is_traced(box.pending()):
        return None
    array = box.array  # a logical value (attention's [batch, heads, seq, d] output) in storage order: t's
    if array.ndim <= 2:
        return None
    if array.shape[-1] == t.shape[1]:
        return array
    # Its rows may end in more than one dim: attention's [batch, seq, heads, d] output, reshaped to
    # [batch, seq, heads * d] for the projection (a fresh array, as its heads were transposed), is
    # multiplied as [batch, seq, heads * d]; the rows' product made XLA's TPU compiler copy it twice
    # into a row-major [batch * seq, heads * d] (~93k cycles a layer, issue 37).
    lead, k = list(array.shape[:-1]), array.shape[-1]
    while len(lead) > 2 and k < t.shape[1]:
        k *= lead.pop()
    return array.reshape(*lead, k) if k == t.shape[1] else None


@jitted
def rows_of(body):
    """`body`, its N-D result flattened to rows (the 2-D result of a product over `unflattened`)."""

    def run(*args):
        out = body(*args)
        return out.reshape(-1, out.shape[-1])

    return run
