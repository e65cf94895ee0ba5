"""jaxdev: JAX as a PyTorch device.

    import jaxdev
    x = torch.ones(3, device="jax")

Importing registers the `jax` device (PrivateUse1), its kernels and the CPU fallback.
"""

from __future__ import annotations

import torch

from jaxdev import cache as _cache
from jaxdev import device as _device

_cache.configure()
_device.register()

from jaxdev import autocast as _autocast  # noqa: E402
from jaxdev import compiler as _compiler  # noqa: E402
from jaxdev import fallback as _fallback  # noqa: E402,F401  (registers the CPU fallback; needs the device)
from jaxdev import ops as _ops  # noqa: E402,F401
from jaxdev import storage as _storage  # noqa: E402
from jaxdev import tensor as _tensor  # noqa: E402
from jaxdev.dtypes import UnsupportedDtypeError  # noqa: E402
from jaxdev.fallback import fallback_counts, reset_fallback_counts  # noqa: E402

_storage.install()
_autocast.install()
_compiler.register()

__version__ = "0.1.0"


def to_jax(t: torch.Tensor):
    """The jax.Array holding a jax tensor's values (no copy when the tensor spans its storage)."""
    if not _tensor.is_jax(t):
        raise TypeError(f"to_jax expects a tensor on the jax device, got one on {t.device}")
    return _tensor.read(t)


def from_jax(array) -> torch.Tensor:
    """A jax tensor that owns `array` (no copy)."""
    import jax

    if not isinstance(array, jax.Array):
        raise TypeError(f"from_jax expects a jax.Array, got {type(array).__name__}")
    return _tensor.wrap(array)


__all__ = [
    "UnsupportedDtypeError",
    "fallback_counts",
    "from_jax",
    "reset_fallback_counts",
    "to_jax",
]
