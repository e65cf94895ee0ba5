"""Random number state of the jax device, driven by `torch.manual_seed` like any device.

The state is (seed, offset): each random op takes the key fold_in(PRNGKey(seed), offset) and
advances the offset by one, so a given seed replays the same stream of random ops exactly.
"""

from __future__ import annotations

import random

import jax
import torch

_DEFAULT_SEED = 67280421310721  # PyTorch's default seed for a fresh generator


class _State:
    seed: int = _DEFAULT_SEED
    offset: int = 0
    initialized: bool = False


_state = _State()


def manual_seed(seed: int) -> None:
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


def next_key() -> jax.Array:
    """A fresh key for one random op."""
    key = jax.random.fold_in(jax.random.key(_state.seed & 0xFFFF_FFFF), _state.offset)
    key = jax.random.fold_in(key, _state.seed >> 32)
    _state.offset += 1
    return key


def get_state() -> torch.Tensor:
    """The state as a CPU uint8 tensor, as `torch.cuda.get_rng_state` returns it."""
    return torch.tensor([_state.seed, _state.offset], dtype=torch.int64).view(torch.uint8)


def set_state(state: torch.Tensor) -> None:
    if not isinstance(state, torch.Tensor) or state.dtype != torch.uint8 or state.numel() != 16:
        raise RuntimeError("jax RNG state must be a uint8 tensor of 16 bytes, as get_rng_state() returns")
    seed_, offset = state.cpu().view(torch.int64).tolist()
    _state.seed = seed_ & 0xFFFF_FFFF_FFFF_FFFF
    _state.offset = offset
