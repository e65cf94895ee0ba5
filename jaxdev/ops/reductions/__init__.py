"""Reductions, by concern: sums and products, extrema (with indices), truth reductions, moments
(var/std) and norms. Result dtypes follow PyTorch: sum/prod of integers and bools give int64 unless
`dtype=` is given; mean needs a floating or complex input; float16/bfloat16 accumulate in float32.
Importing the package registers them all."""

from jaxdev.ops.reductions import extrema, logical, moments, norms, sums  # noqa: F401
