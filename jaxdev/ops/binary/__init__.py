"""Elementwise binary ops, by concern: the promotion and refusal rules every kernel applies (rules),
arithmetic with alpha and rounding modes, powers, comparisons and logical ops, float-valued ops, and
integer-only ops. Result dtypes are `torch.result_type`'s; half precision computes in float32.
Importing the package registers them all."""

from jaxdev.ops.binary import arithmetic, comparisons, floating, integer, powers  # noqa: F401
