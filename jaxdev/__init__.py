"""jaxdev: JAX as a PyTorch device.

    import jaxdev
    x = torch.ones(3, device="jax")

Importing registers the `jax` device (PrivateUse1), its kernels, the CPU fallback, autocast and the
`torch.compile` backend "jax".
"""

from __future__ import annotations

__version__ = "0.1.0"


def _autoload() -> None:
    """The `torch.backends` entry point of installs made before `_jaxdev_autoload` took that role: an
    editable install keeps its entry-point metadata until it is reinstalled, and `import torch` must
    not fail there in the meantime. Importing jaxdev registered the device; nothing is left to do.
    Defined before any import: when `import jaxdev` comes first, its own `import torch` calls this
    on the half-initialised package."""


# ruff: noqa: E402  (_autoload must exist before the first import, and registration runs between imports)
from jaxdev import device as _device
from jaxdev.programs import cache as _cache
from jaxdev.programs import exec_cache as _exec_cache

_exec_cache.install()  # in JAX's compile path; asks cache.directory() at each program
_cache.configure()
_device.register()

from jaxdev import compiler as _compiler
from jaxdev import eager_modes as _eager_modes
from jaxdev import fallback as _fallback  # noqa: F401  (registers the CPU fallback; needs the device)
from jaxdev import layout as _layout
from jaxdev import ops as _ops  # noqa: F401
from jaxdev.capabilities import accelerators as _accelerators
from jaxdev.capabilities import autocast as _autocast
from jaxdev.capabilities import generator as _generator
from jaxdev.capabilities import host_methods as _host_methods
from jaxdev.capabilities import memory as _memory
from jaxdev.capabilities import parameters as _parameters
from jaxdev.capabilities import pinned as _pinned
from jaxdev.capabilities import serialization as _serialization
from jaxdev.capabilities import streams as _streams
from jaxdev.capabilities.custom_ops import jax_op
from jaxdev.capabilities.interop import from_jax, to_jax
from jaxdev.dtypes import PlatformDtypeError, UnsupportedDtypeError, UnsupportedError, UnsupportedLayoutError
from jaxdev.eager_modes import eager_mode, get_eager_mode
from jaxdev.fallback import fallback_counts, reset_fallback_counts
from jaxdev.fused import mode as _fused_mode
from jaxdev.parallel.mesh import (
    distribute,
    from_process_local,
    get_mesh,
    is_sharded,
    mesh,
    set_mesh,
    shard,
    sharding,
    unshard,
)
from jaxdev.programs import executables as _executables

_memory.install()
_streams.install()
_pinned.install()
_accelerators.install()
_executables.install()
_serialization.install()
_autocast.install()
_parameters.install()
_generator.install()
_host_methods.install()
_layout.install_fake_convolution()
_compiler.register()

from jaxdev.parallel import distributed as _distributed

_distributed.register()  # the torch.distributed backend "jax" (gloo on host copies)
_fused_mode.install()  # the "fused" eager mode's handler (jaxdev/fused/)
_eager_modes.install()

from jaxdev.capabilities import shutdown as _shutdown

_shutdown.install()  # last: freezes the import-time heap, so exit's collections skip it (jaxdev/capabilities/shutdown.py)


__all__ = [
    "PlatformDtypeError",
    "UnsupportedDtypeError",
    "UnsupportedError",
    "UnsupportedLayoutError",
    "distribute",
    "eager_mode",
    "fallback_counts",
    "from_jax",
    "from_process_local",
    "get_eager_mode",
    "get_mesh",
    "is_sharded",
    "jax_op",
    "mesh",
    "reset_fallback_counts",
    "set_mesh",
    "shard",
    "sharding",
    "to_jax",
    "unshard",
]
