"""JAXDEV_MATH, read once: whose float32 functions (and division) kernels trace. What each value means is
transcendentals.py's docstring; division.py and cpu_arithmetic.py read it too (fast and near: the
platform's division, square root and multiply-adds), below the functions that import it.
Unset, the platform's default (jaxdev/math_settings.py: near on an accelerator, auto on CPU)."""

from __future__ import annotations

import contextlib
import os

from jaxdev.math_settings import check, default_for, resolve

_mode: str | None = None


def mode() -> str:
    """JAXDEV_MATH as read once, or the platform's default (`default_for`) when unset."""
    global _mode
    if _mode is None:
        value = os.environ.get("JAXDEV_MATH")
        if value and value.strip():
            _mode = resolve(value, "cpu")
        else:
            import jax

            _mode = default_for(jax.default_backend())
    return _mode


def forget() -> None:
    """JAXDEV_MATH read again at the next kernel trace: unset, it is the platform's default, which
    changes when a stand-in starts saying it is a TPU (jaxdev/audit/deviceless.py's forget_platform)."""
    global _mode
    _mode = None


@contextlib.contextmanager
def forced(value: str):
    """JAXDEV_MATH=`value` while the block runs, for code traced inside it (tests: a kernel whose
    program was traced before keeps the functions it was traced with)."""
    global _mode
    previous, _mode = _mode, check(value)
    try:
        yield
    finally:
        _mode = previous


def platform_arithmetic() -> bool:
    """Whether kernels take the platform's float32 arithmetic as it is (its division within its ulps,
    its square root, its multiply-adds rounded as it rounds them) over CPU's bits: fast and near."""
    return mode() in ("fast", "near")
