"""Pooling over the last 2 or 3 dims, one code for both ranks, by concern: the shared geometry
(windows), max pooling with indices, adaptive max pooling and max unpooling (max_pool), average and
adaptive average pooling (avg_pool), and fractional max pooling. Importing the package registers them."""

from jaxdev.ops.pooling import avg_pool, fractional, max_pool  # noqa: F401
