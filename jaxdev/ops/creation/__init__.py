"""Factories; importing this package registers them.

fills.py: empty, empty_strided, fill_, zero_, scalar_tensor, the filled factories in one program;
ranges.py: arange; spaced.py: linspace and logspace; matrices.py: eye and tril/triu_indices;
windows.py: the Kaiser window. Composite factories (zeros, ones, full, *_like, tensor) reach these
through PyTorch's own CompositeExplicitAutograd kernels (empty + fill_, empty + arange.out, ...) where
fills.py does not take them in one program.
"""

from jaxdev.ops.creation import fills, matrices, ranges, spaced, windows  # noqa: F401
