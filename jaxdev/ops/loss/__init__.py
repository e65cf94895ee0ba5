"""Losses, forward and backward, by kind; importing this package registers them."""

from jaxdev.ops.loss import ctc, margin, nll, pointwise  # noqa: F401
