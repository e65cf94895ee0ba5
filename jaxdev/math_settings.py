"""The JAXDEV_MATH settings and what each platform's kernels run under when it is unset, with nothing
imported: the auditor's records (audit.model.Platform) read it in processes that must not load the
device (a peer backend's workers), the kernels through ops/kit/math_mode.py.

Unset, the setting is the platform's default (`default_for`): auto (CPU's bits) on XLA's CPU backend,
near on an accelerator. Why near there: on a TPU v5e (2026-12-07, the GPT LM's bf16 training step) CPU's
bits in the chip's arithmetic cost the step 10.93 ms against near's 9.16, and its cold first step more
than 171 s against 52 (torchax's 27), while near's own functions stay within a few ulps of CPU's. On
XLA's CPU backend near and auto make the same programs, so the default changes nothing there."""

from __future__ import annotations

SETTINGS = ("auto", "near", "fast", "own")


def default_for(platform: str) -> str:
    """The setting JAXDEV_MATH unset means on `platform` (a JAX platform name): auto on cpu, near else."""
    return "auto" if platform == "cpu" else "near"


def resolve(value: str | None, platform: str) -> str:
    """The setting a JAXDEV_MATH `value` (None or empty: unset) means on `platform`; one sentence for a
    value that is none of them."""
    value = (value or "").strip().lower()
    return check(value) if value else default_for(platform)


def check(value: str) -> str:
    """`value` if it is a setting; else one sentence."""
    if value not in SETTINGS:
        raise ValueError(f"JAXDEV_MATH must be auto, near, fast or own, not {value!r}")
    return value
