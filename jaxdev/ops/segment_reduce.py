"""segment_reduce and its backward (CPU: SegmentReduce.cpp): reductions over consecutive segments
of a dim, given by lengths or offsets."""

from __future__ import annotations

import jax.numpy as jnp
import torch

from jaxdev import dtypes, tracing
from jaxdev.ops.kit import J, jitted, opmath, wrap_dim
from jaxdev.ops.registry import aten, register_functional

_SEGMENT_REDUCTIONS = {
    "max": "max",
    "amax": "max",
    "min": "min",
    "amin": "min",
    "sum": "sum",
    "mean": "mean",
    "prod": "prod",
}


def _segment_reduction(reduce: str) -> str:
    if reduce not in _SEGMENT_REDUCTIONS:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got {reduce}")
    return _SEGMENT_REDUCTIONS[reduce]


def _segment_bounds(lengths, offsets, axis):
    """(offsets as (outer, S + 1), kind): CPU's lengths become offsets by a running sum."""
    if offsets is not None:
        o = J(offsets)
        return o.reshape(-1, o.shape[-1]).astype(jnp.int64)
    n = J(lengths)
    n = n.reshape(-1, n.shape[-1]).astype(jnp.int64)
    return jnp.concatenate([jnp.zeros((n.shape[0], 1), jnp.int64), jnp.cumsum(n, axis=1)], axis=1)


def _segment_membership(off, length):
    """(member (outer, S, L), per-segment length (outer, S)): position p is in segment s when
    offsets[s] <= p < offsets[s + 1]."""
    p = jnp.arange(length)
    member = (p[None, None, :] >= off[:, :-1, None]) & (p[None, None, :] < off[:, 1:, None])
    return member, off[:, 1:] - off[:, :-1]


@jitted
def _segment_reduce_body(reduce: str, initial, jdt):
    c = opmath(jnp.dtype(jdt))

    def body(x, off):
        x = x.astype(c)  # (outer, L, inner)
        member, n = _segment_membership(off, x.shape[1])
        m = member[..., None]  # (outer, S, L, 1)
        xs = x[:, None]  # (outer, 1, L, inner)
        if initial is not None:
            init = jnp.asarray(initial, jdt).astype(c)
        else:
            init = {"max": -jnp.inf, "min": jnp.inf, "sum": 0, "mean": 0, "prod": 1}[reduce]
            init = jnp.asarray(init, c)
        if reduce == "max":
            r = jnp.maximum(init, jnp.max(jnp.where(m, xs, -jnp.inf), axis=2))
        elif reduce == "min":
            r = jnp.minimum(init, jnp.min(jnp.where(m, xs, jnp.inf), axis=2))
        elif reduce == "prod":
            r = init * jnp.prod(jnp.where(m, xs, 1), axis=2)
        else:
            r = init + jnp.sum(jnp.where(m, xs, 0), axis=2)
        if reduce == "mean":
            count = n[..., None].astype(c)
            if initial is None:
                r = jnp.where(count == 0, jnp.nan, r / jnp.maximum(count, 1))
            else:
                r = jnp.where(count > 0, r / jnp.maximum(count, 1), r)
        return r.astype(jdt)

    return body


def _segment_layout(data, axis):
    shape = tuple(data.shape)
    outer = 1
    for s in shape[:axis]:
        outer *= s
    inner = 1
    for s in shape[axis + 1 :]:
        inner *= s
    return shape, outer, inner


def _segment_checks(data, reduce, lengths, indices, offsets, axis, unsafe=True):
    if data.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        raise NotImplementedError(f"\"_segment_reduce_cpu\" not implemented for '{dtypes.scalar_name(data.dtype)}'")
    axis = wrap_dim(axis, data.dim())
    if indices is not None:
        raise RuntimeError("segment_reduce(): indices based reduction is not supported yet.")
    if lengths is None and offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined.")
    reduction = _segment_reduction(reduce)
    bounds, name = (offsets, "offsets") if offsets is not None else (lengths, "lengths")
    if data.dim() < bounds.dim():
        raise RuntimeError(f"segment_reduce(): Expected {name} to have at most data's dimensions")
    if axis != bounds.dim() - 1:
        raise RuntimeError(f"segment_reduce(): Expected axis to be the last dimension of {name} but got {axis}.")
    if bounds.dtype not in (torch.int32, torch.int64):
        kernel = "_segment_reduce_lengths_cpu_kernel1" if offsets is None else "_segment_reduce_offsets_cpu_kernel1"
        raise NotImplementedError(f"\"{kernel}\" not implemented for '{dtypes.scalar_name(bounds.dtype)}'")
    if offsets is None and not unsafe:
        n = J(lengths)
        tracing.check_values(n < 0, lambda: RuntimeError("lengths contains negative value!"))
        tracing.check_values(
            jnp.sum(n, axis=-1) != data.shape[axis],
            lambda: RuntimeError(
                "segment_reduce(): Expected all rows of lengths along axis to sum to data.size(lengths.dim()-1) "
                "when !unsafe."
            ),
        )
    return axis, reduction


def _initial_value(initial):
    if initial is None or isinstance(initial, (bool, int, float)):
        return initial
    return complex(initial) if isinstance(initial, complex) else float(initial)


@register_functional(aten.segment_reduce.default)
def segment_reduce(data, reduce, *, lengths=None, indices=None, offsets=None, axis=0, unsafe=False, initial=None):
    """CPU's rule per segment: start from `initial` (or -inf / inf / 0 / 1), fold the elements in
    (max and min propagate NaN), mean divides by the length unless the segment is empty (NaN then,
    or `initial` when given)."""
    axis, reduction = _segment_checks(data, reduce, lengths, indices, offsets, axis, unsafe)
    shape, outer, inner = _segment_layout(data, axis)
    off = _segment_bounds(lengths, offsets, axis)
    x = J(data).reshape(outer, shape[axis], inner)
    r = _segment_reduce_body(reduction, _initial_value(initial), x.dtype)(x, off)
    return r.reshape(shape[:axis] + (off.shape[1] - 1,) + shape[axis + 1 :])


@jitted
def _segment_grad_body(reduce: str, initial, jdt):
    c = opmath(jnp.dtype(jdt))

    def body(g, out, x, off):
        g, out, x = g.astype(c), out.astype(c), x.astype(c)  # (outer, S, inner), (outer, S, inner), (outer, L, inner)
        member, n = _segment_membership(off, x.shape[1])
        inside = jnp.any(member, axis=1)  # (outer, L)
        seg = jnp.argmax(member, axis=1)  # (outer, L): the segment of each position
        take = lambda v: jnp.take_along_axis(v, seg[..., None], axis=1)  # (outer, L, inner)
        gp, op = take(g), take(out)
        if reduce in ("max", "min"):
            match = (jnp.isnan(x) | (x == op)) & inside[..., None]
            gi = jnp.where(match, gp, 0)
            counter = jnp.einsum("osl,oli->osi", member.astype(c), match.astype(c))
            cp = take(counter)
            gi = jnp.where((cp >= 2) & (gi > 0), gi / jnp.maximum(cp, 1), gi)  # CPU divides positive ones only
        elif reduce == "mean":
            gi = gp / take(n[..., None].astype(c))
        elif reduce == "sum":
            gi = gp
        else:
            same = member[:, :, :, None] & member[:, :, None, :]  # (outer, S, L, L)
            same = jnp.any(same, axis=1) & ~jnp.eye(x.shape[1], dtype=bool)  # (outer, L, L): q in p's segment
            start = jnp.asarray(1 if initial is None else initial, jdt).astype(c)
            excl = start * jnp.prod(jnp.where(same[..., None], x[:, None], 1), axis=2)
            gi = jnp.where(jnp.isnan(x) | (x == 0), gp * excl, gp * op / x)
        return jnp.where(inside[..., None], gi, 0).astype(jdt)

    return body


@register_functional(aten._segment_reduce_backward.default)
def segment_reduce_backward(grad, output, data, reduce, *, lengths=None, offsets=None, axis=0, initial=None):
    axis, reduction = _segment_checks(data, reduce, lengths, None, offsets, axis)
    shape, outer, inner = _segment_layout(data, axis)
    off = _segment_bounds(lengths, offsets, axis)
    segments = off.shape[1] - 1
    x = J(data).reshape(outer, shape[axis], inner)
    g = J(grad).reshape(outer, segments, inner)
    out = J(output).reshape(outer, segments, inner)
    if segments == 0 or x.size == 0:
        return jnp.zeros(shape, x.dtype)
    return _segment_grad_body(reduction, _initial_value(initial), x.dtype)(g, out, x, off).reshape(shape)
