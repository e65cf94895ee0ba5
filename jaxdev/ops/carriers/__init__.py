"""The dtype carriers: dtypes JAX has no type of, held in one it has and served as CPU serves them.
The raw bytes (bits1x8 ... bits16, the float8/float4 families CPU only moves: bit_dtypes.py) and
complex32 (two float16 parts in a uint32: complex_half.py, with complex_half_bits.py and
complex_half_values.py). Importing this package puts them in the registry's table
(registry.CARRIERS), through which every kernel passes as it registers: the registry knows the table,
not the carriers, and jaxdev/ops/__init__.py imports this package before any family."""

from jaxdev.ops import registry
from jaxdev.ops.carriers import bit_dtypes, complex_half

if registry.KERNELS:
    raise RuntimeError("the dtype carriers must be in registry.CARRIERS before the first kernel registers")
registry.CARRIERS[:] = [bit_dtypes.serving_bytes, complex_half.serving]
