"""The values an argument builder gives (facts/arguments): random CPU values from a `Ctx`, and
wrappers for arguments the trial must place specially (`OnCpu`, `StorageOf`) or choose by the
overload's schema type (`ByType`)."""

from __future__ import annotations


class OnCpu:
    """An argument PyTorch requires on CPU whatever the op's device."""

    def __init__(self, value):
        self.value = value


class StorageOf:
    """The untyped storage of this tensor once moved to the trial's device."""

    def __init__(self, tensor):
        self.tensor = tensor


class ByType:
    """One value per schema type (`Tensor`, `List[int]`, `Storage`, ...) for an argument whose type
    differs between the overloads of a family (gradient's spacing: Scalar[] or Tensor[])."""

    def __init__(self, by_type: dict):
        self.by_type = by_type


class Ctx:
    """Random CPU values for one candidate: `gen` seeded per candidate, `dtype` its floating dtype."""

    def __init__(self, gen, dtype):
        self.gen = gen
        self.dtype = dtype

    def randn(self, *shape, dtype=None):
        import torch

        return torch.randn(shape, generator=self.gen, dtype=dtype or self.dtype)

    def rand(self, *shape, low: float = 0.0, high: float = 1.0, dtype=None):
        import torch

        return low + (high - low) * torch.rand(shape, generator=self.gen, dtype=dtype or self.dtype)

    def randint(self, low: int, high: int, *shape, dtype=None):
        import torch

        return torch.randint(low, high, shape, generator=self.gen, dtype=dtype or torch.int64)

    def spd(self, n: int):
        """A well-conditioned symmetric positive definite n x n matrix."""
        import torch

        a = self.randn(n, n)
        return a @ a.mT + n * torch.eye(n, dtype=self.dtype)

    def well_conditioned(self, n: int):
        import torch

        return self.randn(n, n) + n * torch.eye(n, dtype=self.dtype)
