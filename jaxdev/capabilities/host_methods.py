"""`Tensor.apply_`, `map_` and `map2_` on jax tensors: each element through a Python callable, as on CPU.

PyTorch implements the three for CPU tensors only (elsewhere: "map_ is only implemented on CPU
tensors", CUDA included), since they call Python once per element. A jax tensor's values are read to
the host anyway for that, so jaxdev runs PyTorch's own CPU method on host copies and writes the
result back in place: the same values, broadcasting, argument checks and errors as CPU's, and the
tensor's version counter bumps as after any in-place op. Installed over `torch.Tensor`'s methods;
anything that is not a jax tensor goes to PyTorch's method as it is.
"""

from __future__ import annotations

import torch

_METHODS = {"apply_": 0, "map_": 1, "map2_": 2}  # name -> tensor arguments before the callable
_original: dict[str, object] = {}


def _is_jax(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "jax"


def _host_method(name: str, tensors: int):
    original = _original[name]

    def method(self, *args, **kwargs):
        if not _is_jax(self) or len(args) != tensors + 1 or kwargs:
            return original(self, *args, **kwargs)
        others = args[:tensors]
        for i, other in enumerate(others):
            if not (_is_jax(other) and other.dtype == self.dtype):
                label = "'other'" if tensors == 1 else f"argument '{'xy'[i]}'"  # CPU's words
                got = other.type() if isinstance(other, torch.Tensor) else type(other).__name__
                raise TypeError(f"{name}: expected {self.type()} for {label} (got {got})")
        host = self.detach().cpu() if not self.requires_grad else self.cpu()
        original(host, *(o.detach().cpu() if not o.requires_grad else o.cpu() for o in others), args[-1])
        with torch.no_grad():
            self.copy_(host)
        return self

    method.__name__ = method.__qualname__ = name
    method.__doc__ = getattr(original, "__doc__", None)
    return method


def install() -> None:
    for name, tensors in _METHODS.items():
        if name not in _original:
            _original[name] = getattr(torch.Tensor, name)
            setattr(torch.Tensor, name, _host_method(name, tensors))
