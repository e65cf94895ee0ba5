"""Padding: constant_pad_nd, reflection_pad{1,2,3}d and replication_pad{1,2,3}d, with backward.

`pad` lists (left, right) pairs from the last dim backwards; a negative amount crops. Reflection and
replication pads gather each output position from a source index along each padded dim; their
backward is the transposed gather (a scatter-add); for float16/bfloat16 it is CPU's loop, each
output element added into its source in the output's row-major order and every sum rounded to the
half dtype (up to 256 contributions per element; past that the scatter-add).
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np

from jaxdev.ops.kit import J, jitted
from jaxdev.ops.kit.cpu_numerics import narrowed, round_to
from jaxdev.ops.registry import aten, register_backward, register_functional

# --- constant -----------------------------------------------------------------------------------


@jitted
def _constant(config):
    return lambda x, v: jax.lax.pad(x, narrowed(v, x.dtype), config)  # a double to a half through float


@register_functional(aten.constant_pad_nd.default)
def constant_pad_nd(self, pad, value=0):
    pad = list(pad)
    if len(pad) % 2:
        raise RuntimeError("Length of pad must be even but instead it equals " + str(len(pad)))
    if len(pad) // 2 > self.dim():
        raise RuntimeError(
            "Length of pad should be no more than twice the number of dimensions of the input. "
            f"Pad length is {len(pad)} while the input has {self.dim()} dimensions."
        )
    sizes = list(self.shape)
    for d in range(self.dim() - len(pad) // 2, self.dim()):  # CPU narrows for negative pads first, in dim order
        for p in pad[2 * (self.dim() - 1 - d) : 2 * (self.dim() - d)]:
            if p < 0:
                if sizes[d] + p < 0:
                    raise RuntimeError("narrow(): length must be non-negative.")
                sizes[d] += p
    config = [(0, 0, 0)] * self.dim()
    for i in range(len(pad) // 2):
        d = self.dim() - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        if self.shape[d] + lo + hi < 0:
            raise RuntimeError(
                f"The input size {self.shape[d]}, plus negative padding {lo} and {hi} resulted in a "
                f"negative output size, which is invalid. Check dimension {d} of your input."
            )
        config[d] = (lo, hi, 0)
    x = J(self)
    return _constant(tuple(config))(x, jnp.asarray(value))


# --- reflection / replication -------------------------------------------------------------------


def _source(n, lo, hi, mode):
    """Source index along one dim for each output position of a dim of size n padded by (lo, hi)."""
    i = np.arange(-lo, n + hi)
    if mode == "reflect":
        i = np.abs(i)
        i = np.where(i >= n, 2 * (n - 1) - i, i)
    else:
        i = np.clip(i, 0, n - 1)
    return i


def _gather(x, sources):
    for k, src in enumerate(sources):
        axis = x.ndim - len(sources) + k
        x = jnp.take(x, jnp.asarray(src), axis=axis)
    return x


# CPU's backward for half dtypes as an unrolled fold: at most this many contributions per input element
_MAX_FOLD = 256


def _contributions(src, n):
    """For each input index along one dim, the output indices that read it, ascending: a table
    (n, K) and its mask, K the most any index gets."""
    lists = [np.flatnonzero(src == i) for i in range(n)]
    k = max(len(lst) for lst in lists)
    table, mask = np.zeros((n, k), np.int64), np.zeros((n, k), bool)
    for i, lst in enumerate(lists):
        table[i, : len(lst)], mask[i, : len(lst)] = lst, True
    return table, mask


def _half_backward(g, sources, sizes):
    """CPU's cpu_padding_backward for a half dtype: grad_input += grad_output in the output's row-major
    order (outer dims first), each += rounding to the half dtype. An input element's contributions in
    that order are its per-dim contribution lists taken lexicographically, so step (r_1, ..., r_k)
    adds, for every element at once, the output element of rank r_d along each dim."""
    tables = [_contributions(src, n) for src, n in zip(sources, sizes)]
    lead = g.ndim - len(sources)
    acc = jnp.zeros((*g.shape[:lead], *sizes), jnp.float32)
    for ranks in itertools.product(*(range(t.shape[1]) for t, _ in tables)):
        val, keep = g, None
        for k, ((table, mask), r) in enumerate(zip(tables, ranks)):
            val = jnp.take(val, jnp.asarray(table[:, r]), axis=lead + k)
            m = jnp.asarray(mask[:, r]).reshape((-1,) + (1,) * (len(sources) - 1 - k))
            keep = m if keep is None else keep & m
        acc = round_to(g.dtype)(acc + jnp.where(keep, val.astype(jnp.float32), 0.0))  # each sum rounded
    return acc.astype(g.dtype)


@jitted
def _padder(sources_key, mode):
    sources = [_source(n, lo, hi, mode) for n, lo, hi in sources_key]
    sizes = tuple(n for n, _, _ in sources_key)
    steps = int(np.prod([_contributions(src, n)[0].shape[1] for src, n in zip(sources, sizes)]))

    @jax.custom_vjp
    def pad(x):
        return _gather(x, sources)

    def forward(x):
        return _gather(x, sources), jnp.zeros((0,), x.dtype)

    def backward(residual, g):
        if g.dtype in (jnp.float16, jnp.bfloat16) and steps <= _MAX_FOLD:
            return (_half_backward(g, sources, sizes),)
        shape = (*g.shape[: g.ndim - len(sizes)], *sizes)
        _, vjp = jax.vjp(lambda x: _gather(x, sources), jnp.zeros(shape, g.dtype))
        return vjp(g)

    pad.defvjp(forward, backward)
    return pad


_AXES = "DHW"


def _pad_key(self, padding, nd, mode):
    """(size, lo, hi) per padded dim, outermost first, with PyTorch's checks."""
    if self.dim() not in (nd + 1, nd + 2) or any(s == 0 for s in self.shape[1:]):
        raise RuntimeError(
            f"Expected {nd + 1}D or {nd + 2}D (batch mode) tensor with possibly 0 batch size and other "
            f"non-zero dimensions for input, but got: {list(self.shape)}"
        )
    if len(padding) != 2 * nd:
        raise RuntimeError(f"padding size is expected to be {2 * nd}, but got: {len(padding)}")
    key = []
    for k in range(nd):
        d = self.dim() - nd + k
        lo, hi = padding[2 * (nd - 1 - k)], padding[2 * (nd - 1 - k) + 1]
        n = self.shape[d]
        if mode == "reflect" and (lo >= n or hi >= n):
            raise RuntimeError(
                f"Argument #{4 + 2 * (nd - 1 - k)}: Padding size should be less than the corresponding "
                f"input dimension, but got: padding ({lo}, {hi}) at dimension {d} of input {list(self.shape)}"
            )
        if n + lo + hi < 1:
            name = _AXES[3 - nd + k]
            raise RuntimeError(f"input ({name}: {n}) is too small. Calculated output {name}: {n + lo + hi}")
        key.append((n, lo, hi))
    return tuple(key)


def _pad_ops(mode, nd, forward, backward):
    @register_functional(forward)
    def pad(self, padding):
        return _padder(_pad_key(self, padding, nd, mode), mode)(J(self))

    register_backward(backward, forward)


for _nd, _fwd, _bwd in [
    (1, aten.reflection_pad1d.default, aten.reflection_pad1d_backward.default),
    (2, aten.reflection_pad2d.default, aten.reflection_pad2d_backward.default),
    (3, aten.reflection_pad3d.default, aten.reflection_pad3d_backward.default),
]:
    _pad_ops("reflect", _nd, _fwd, _bwd)

for _nd, _fwd, _bwd in [
    (1, aten.replication_pad1d.default, aten.replication_pad1d_backward.default),
    (2, aten.replication_pad2d.default, aten.replication_pad2d_backward.default),
    (3, aten.replication_pad3d.default, aten.replication_pad3d_backward.default),
]:
    _pad_ops("replicate", _nd, _fwd, _bwd)
