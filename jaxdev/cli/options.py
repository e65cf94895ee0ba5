"""The options that choose what to run, declared once for `coverage` and `gate`."""

from __future__ import annotations

import os

import click

from jaxdev.audit import facts


def scope_options(*, defaults_from_baseline: bool = False):
    """OPS, --all-reaching, --dtype, --no-backward, --mode, --jobs, --timeout, --max-samples. With
    `defaults_from_baseline`, --mode, --timeout and --max-samples default to the baseline's (None here)."""
    timeout_help = "Seconds a sample may take before it counts as a hang"
    samples_help = "The first N samples of each (op, dtype, direction)"
    options = [
        click.argument("ops", nargs=-1),
        click.option(
            "--all-reaching",
            is_flag=True,
            help="An aten name in OPS selects every OpInfo whose samples reach it, not only those named after it.",
        ),
        click.option(
            "--dtype",
            "dtypes",
            multiple=True,
            help=f"Only this dtype (float32, int64, ...). Repeatable; {facts.ALL_DTYPES}: every dtype (for --mode "
            "compile and fused, which run float32 otherwise).",
        ),
        click.option("--no-backward", is_flag=True, help="Forward only (no backward, no compile-backward)."),
        click.option(
            "--mode",
            type=click.Choice(facts.MODES),
            default=None if defaults_from_baseline else "eager",
            show_default=not defaults_from_baseline,
            help="eager: forward (every CPU dtype) and backward (every dtype the OpInfo differentiates) op by op; compile: the forward through "
            "torch.compile(backend='jax', fullgraph=True) (compile) and torch.autograd.grad through its compiled backward graph "
            f"(compile-backward), {facts.COMPILE_DEFAULT_DTYPE} unless --dtype; fused: the forward in fused "
            f"eager mode (jaxdev.eager_mode('fused')), {facts.FUSED_DEFAULT_DTYPE} unless --dtype; both: eager and compile"
            + (" (default: every direction the baseline holds)." if defaults_from_baseline else "."),
        ),
        click.option(
            "--jobs", "-j", type=int, default=os.cpu_count() or 1, show_default=True, help="Worker processes."
        ),
        click.option(
            "--timeout",
            type=float,
            default=None if defaults_from_baseline else facts.DEFAULT_TIMEOUT_S,
            show_default=not defaults_from_baseline,
            help=timeout_help + (" (default: the baseline's)." if defaults_from_baseline else "."),
        ),
        click.option(
            "--max-samples",
            type=int,
            default=None if defaults_from_baseline else facts.DEFAULT_MAX_SAMPLES,
            show_default=not defaults_from_baseline,
            help=samples_help
            + ("; default: the baseline's." if defaults_from_baseline else "; recorded in the matrix."),
        ),
    ]

    def decorate(fn):
        for option in reversed(options):
            fn = option(fn)
        return fn

    return decorate
