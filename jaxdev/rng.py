"""Random number state of the jax device, driven by `torch.manual_seed` like any device.

The state is (seed, offset): each random op takes the key fold_in(PRNGKey(seed), offset) and
advances the offset by one, so a given seed replays the same stream of random ops exactly.

Inside a compiled program (`jaxdev/compiler`) the state is an input of the program: `traced(base)`
makes the k-th random op of the program take the key of offset `base.offset + k`, and the program's
runner advances the offset by the number of random ops after each call. A compiled step therefore
draws the same numbers as the same ops run eagerly, and both replay from `torch.manual_seed`.
"""

from __future__ import annotations

import contextlib
import random

import jax
import numpy as np
import torch

_DEFAULT_SEED = 67280421310721  # PyTorch's default seed for a fresh generator


class _State:
    seed: int = _DEFAULT_SEED
    offset: int = 0
    initialized: bool = False


_state = _State()


def _settle_pending() -> None:
    """Fused eager's pending random ops draw from the state as it is now, as they would have eagerly."""
    # Imported here: jaxdev/device.py imports this module before the device exists, and eager_modes'
    # imports (the tensor core) need it.
    from jaxdev import eager_modes

    eager_modes.ACTIVE.handler.flush()


def manual_seed(seed: int) -> None:
    _settle_pending()
    seed = int(seed)
    # torch.manual_seed accepts any 64-bit value (negative ones wrap): keep the same range.
    _state.seed = seed & 0xFFFF_FFFF_FFFF_FFFF
    _state.offset = 0


def seed() -> int:
    s = random.getrandbits(63)
    manual_seed(s)
    return s


def initial_seed() -> int:
    return _state.seed


class _Traced:
    base = None  # int64[3] tracer (seed low 32 bits, seed high 32 bits, offset) while tracing
    draws = 0


_traced = _Traced()


def _key(lo, offset, hi) -> jax.Array:
    """fold_in(fold_in(key(lo), offset), hi): the key of a draw."""
    return jax.random.fold_in(jax.random.fold_in(jax.random.key(lo), offset), hi)


@jax.jit
def _key_of(parts):
    return _key(parts[0], parts[1], parts[2])


def next_key(generator=None) -> jax.Array:
    """A fresh key for one random op: from `generator` when one is given (a jax
    `torch.Generator`, see jaxdev/capabilities/generator.py), else from the device's state. Eagerly the key is made by one
    jitted call on the three numbers (three eager calls took ~230 us for a 4x4 randn); traced, inside
    the program."""
    if _traced.base is not None and generator is None:
        lo, hi, offset = _traced.base[0], _traced.base[1], _traced.base[2] + _traced.draws
        _traced.draws += 1
        return _key(lo, offset, hi)
    if generator is not None:
        s = _draw_seed(generator)
        lo, offset, hi = s & 0xFFFF_FFFF, 0, s >> 32
    else:
        lo, offset, hi = _state.seed & 0xFFFF_FFFF, _state.offset, _state.seed >> 32
        _state.offset += 1
    # fold_in takes 32 bits: the traced path's int64 offset wraps there, and so does this one (eager
    # fold_in refused offsets past 2**32 - 1, the 4,294,967,296th random op of a seed).
    return _key_of(np.array([lo, offset & 0xFFFF_FFFF, hi], dtype=np.int64))


def _draw_seed(generator) -> int:
    """64 random bits from a generator's state (advancing it), for one random op's key."""
    return int(torch.randint(-(2**63), 2**63 - 1, (), dtype=torch.int64, generator=generator)) & (2**64 - 1)


_base: tuple = (None, None)  # (the state, its traced_base array), the last one made


def traced_base() -> np.ndarray:
    """The state as the input of a compiled program (see `traced`): made once per state, read-only, as
    most programs draw nothing (a new array at every fused flush cost the LM's batch-1 read ~15 us)."""
    global _base
    state, base = _base
    if state is None or state[0] != _state.seed or state[1] != _state.offset:
        base = np.array([_state.seed & 0xFFFF_FFFF, _state.seed >> 32, _state.offset], dtype=np.int64)
        base.flags.writeable = False
        _base = ((_state.seed, _state.offset), base)
    return base


@contextlib.contextmanager
def traced(base):
    """Random ops draw from `base` (a traced `traced_base()`); yields a counter of the draws."""
    _traced.base, _traced.draws = base, 0
    try:
        yield _traced
    finally:
        _traced.base = None


def advance(draws: int) -> None:
    """Account for `draws` random ops run by a compiled program."""
    _state.offset += draws


def get_state() -> torch.Tensor:
    """The state as a CPU uint8 tensor, as `torch.cuda.get_rng_state` returns it."""
    _settle_pending()
    return torch.tensor([_state.seed, _state.offset], dtype=torch.int64).view(torch.uint8)


def set_state(state: torch.Tensor) -> None:
    _settle_pending()
    if not isinstance(state, torch.Tensor) or state.dtype != torch.uint8 or state.numel() != 16:
        raise RuntimeError("jax RNG state must be a uint8 tensor of 16 bytes, as get_rng_state() returns")
    seed_, offset = state.cpu().view(torch.int64).tolist()
    _state.seed = seed_ & 0xFFFF_FFFF_FFFF_FFFF
    _state.offset = offset
