"""The auditor's facts as data, in one module that imports nothing heavy (the CLI's help and
option defaults read it without importing torch or jax).

Statuses, worst first; a cell takes the worst status of its samples:
  crash, timeout         the worker died or hung on this sample (set by the runner)
  missing                no kernel can run the op on jax (dispatcher or fallback refused)
  lost_autograd          forward ran but gradients are gone (no grad_fn, None grads, warnings)
  exception              a kernel raised (type + message)
  shape_mismatch, dtype_mismatch, wrong (values beyond tolerance; max abs/rel error recorded)
  stride_mismatch        values right, but a dense non-overlapping result is laid out otherwise
                         than CPU lays it out (strides of its dims longer than 1): `.view` and
                         `.stride()` then behave otherwise, and compiled programs plan views from
                         strides. Not counted with the failures; reports list it beside them
  unsupported            jaxdev cannot hold the sample's tensors by design: the jax run raised
                         jaxdev.UnsupportedError (complex32 has no JAX type; sparse layouts).
                         Judged by the exception's type, never by the dtype's name, so a bug
                         raising anything else stays a failure. Not a failure, and left out of
                         the pass/fallback shares like skip
  untraced               (compile) correct, but the graph ran op by op: an op could not be traced
  fallback               correct, but only because ops ran on CPU through jaxdev's fallback
  pass                   correct on jax kernels alone. For float32, complex64, float16 and bfloat16
                         a value beyond tolerance of CPU's also passes when jax is at least as
                         close as CPU to the float64 result (float64 arbitration, check.arbitrate:
                         the reason gives both errors, and the entry counts `arbitrated` samples)
  skip                   no verdict possible (CPU itself raised, nothing differentiable, or
                         torch.compile cannot run the sample on CPU either)
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

UNSUPPORTED_MEANING = (
    "not supported by design: jaxdev cannot hold these tensors (JAX has no complex32 type; jax tensors are "
    "dense and strided, so no sparse layouts); not a failure, and left out of the pass/fallback shares"
)


class Status(NamedTuple):
    """How a status reads everywhere: its meaning (one line), its terminal colour (rich), and in
    the HTML report its colour, text colour and glyph (the letters in a grid cell)."""

    meaning: str
    colour: str
    html: str
    glyph: str
    dark_text: bool = False  # the HTML badge's text is dark (a light background)


# The one status table, worst first (its order is SEVERITY): the CLI, the Markdown and JUnit
# reports and the HTML page read it.
STATUSES: dict[str, Status] = {
    "crash": Status("the worker died on a sample", "magenta", "#000000", "X"),
    "timeout": Status("a sample hung past the timeout", "magenta", "#424242", "T"),
    "missing": Status("no kernel can run the op on jax", "red", "#c62828", "M"),
    "lost_autograd": Status("forward ran, but the gradients are gone", "red", "#ad1457", "G"),
    "exception": Status("a kernel raised", "red", "#e53935", "E"),
    "shape_mismatch": Status("result shape differs from CPU's", "red", "#5e35b1", "Sh"),
    "dtype_mismatch": Status("result dtype differs from CPU's", "red", "#8e24aa", "Dt"),
    "wrong": Status("values differ from CPU's beyond tolerance", "red", "#6a1b9a", "W"),
    "stride_mismatch": Status("values right, strides not CPU's", "yellow", "#c0ca33", "St", dark_text=True),
    "unsupported": Status(UNSUPPORTED_MEANING.split(":")[0], "cyan", "#90a4ae", "–", dark_text=True),
    "untraced": Status("compiled: correct, but the graph ran op by op", "yellow", "#ef6c00", "U"),
    "fallback": Status("correct only through the CPU fallback", "yellow", "#f9a825", "F", dark_text=True),
    "pass": Status("correct on jax kernels alone", "green", "#5aa95d", ""),
    "skip": Status(
        "no verdict possible (CPU raised, nothing differentiable, ...)", "dim", "#bdbdbd", "·", dark_text=True
    ),
}
SEVERITY = tuple(STATUSES)
# The other words the CLI colours: the dispatcher's routes (DEVICE_STATUSES, AUTOGRAD_STATUSES; a
# route named like a status, `missing` or `fallback`, takes the status's) and aten.yaml's verdicts.
WORD_COLOURS = {
    "native": "green",
    "autograd": "green",
    "math": "cyan",
    "decomposed": "cyan",
    "composite": "blue",
    "lost": "red",
    "fails": "red",
    "untriable": "dim",
}


def colour(word: str) -> str | None:
    """The terminal colour of a status, route or verdict; None for any other word."""
    return STATUSES[word].colour if word in STATUSES else WORD_COLOURS.get(word)


FAILURES = frozenset(SEVERITY[: SEVERITY.index("wrong") + 1])
# Correct, but not the device's own kernels in one program: listed in reports beside the failures.
DEGRADED = ("stride_mismatch", "untraced", "fallback")
# Cells with no measurement of the device's kernels: out of the denominators of the shares.
UNMEASURED = ("unsupported", "skip")

# How an aten overload reaches the device (dispatch.py reads them from the dispatcher's tables;
# coverage/aten.yaml records them as `route`). PrivateUse1 statuses, best first:
DEVICE_STATUSES = ("native", "decomposed", "composite", "fallback", "missing")
# AutogradPrivateUse1 statuses.
AUTOGRAD_STATUSES = ("autograd", "math", "lost", "missing")
DEVICE_MEANING = {
    "native": "a jax kernel registered by jaxdev",
    "decomposed": "CompositeImplicitAutograd: decomposes into other ops before reaching the device",
    "composite": "CompositeExplicitAutograd / default backend kernel: generic code calling other ops on the device",
    "fallback": "no jax kernel: runs on CPU through jaxdev's fallback, results copied back",
    "missing": "nothing can run it on the device",
}
AUTOGRAD_MEANING = {
    "autograd": "an autograd kernel (derivative formula) wraps the device kernel",
    "math": "CompositeImplicitAutograd: gradients come from the decomposition",
    "lost": "backend fallback: the op runs but its gradients are silently lost",
    "missing": "no autograd kernel: backward raises",
}

# forward and backward run the op eagerly; compile runs the forward through torch.compile and
# compile-backward its gradients (torch.autograd.grad through the compiled forward's backward
# graph), each judged against CPU's eager run as its eager twin is; fused runs the eager forward in
# fused eager mode (jaxdev.eager_mode("fused")), judged as forward is.
DIRECTIONS = ("forward", "backward", "compile", "compile-backward", "fused")
BACKWARD_DIRECTIONS = ("backward", "compile-backward")  # dropped by --no-backward; samples need grads
COMPILED_DIRECTIONS = ("compile", "compile-backward")  # through torch.compile(backend="jax")
# What `--mode` runs: eager is forward on every CPU dtype and backward on every dtype the OpInfo
# differentiates on CPU (supported_backward_dtypes("cpu"): 2,731 backward cells, 5x float32's 540;
# ~+40% on a warm full sweep, measured on samples of ops: a backward sample costs ~1.5 forward
# samples); compile is the forward through torch.compile(backend="jax", fullgraph=True) and its
# backward, in float32 unless dtypes are named (--dtype all: every dtype forward and backward run
# in). Float32's 677 compile and 540 compile-backward cells took 708 s on 2 cores shared with other
# jobs; on one shard of 8 the backward added 28 s to the forward's 55 s (the main job: about +3.5
# min). Every dtype is ~6x float32's cells: the main job runs float32, and the other dtypes' cells
# come from scoped runs, which a full run keeps (it replaces only the dtypes it runs). fused is the
# eager forward recorded and run as one cached program per sample (the
# results read inside the mode, then torch.jax.synchronize(): a value error deferred to the sync is
# the sample's exception, as it is the op's in per-op mode), in float32 unless dtypes are named: a
# fused sample costs ~1.3 eager forward samples (a warm shard of 361 samples: 21.0 s against 16.4 s),
# and every dtype took 14.5 min cold, 10.8 min warm on 2 cores (6,109 cells) against float32's 178 s
# and 106 s (677 cells). Not part of `both`, so the main job keeps its time.
MODES = ("eager", "compile", "fused", "both")
MODE_DIRECTIONS = {
    "eager": ("forward", "backward"),
    "compile": ("compile", "compile-backward"),
    "fused": ("fused",),
    "both": ("forward", "backward", "compile", "compile-backward"),
}
# Every dtype a cell may have, written once, in the reports' column order. --dtype takes each name
# but the float8 ones (their cells come with --dtype all: PyTorch's CPU runs few ops in them).
DTYPE_NAMES = (
    "bool",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "int8",
    "int16",
    "int32",
    "int64",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "complex32",
    "complex64",
    "complex128",
)
FLOAT8_DTYPES = tuple(n for n in DTYPE_NAMES if n.startswith("float8_"))
# `--dtype all`: every dtype (the compiled and fused directions otherwise run float32 only).
ALL_DTYPES = "all"
COMPILE_DEFAULT_DTYPE = "float32"
FUSED_DEFAULT_DTYPE = "float32"

MATRIX_FILE = "matrix.yaml"
# `coverage --reference-inputs`: the cells draw from each OpInfo's reference_inputs (sample inputs
# plus extremal values, large and noncontiguous tensors) instead of its sample_inputs, into a file
# of their own so they never replace the sample-input verdicts. Each cell runs REFERENCE_MAX_SAMPLES
# of them unless --max-samples says otherwise, spread evenly over the whole list (its first and last
# included): the 252 OpInfos with reference inputs have ~14,800 in float32 alone (median 39 per
# OpInfo, at most 202), ~140,000 over every dtype: more than a day of compiling on 2 cores, where
# 5 per cell (2,425 forward cells) run in under an hour (~4 samples/s).
INPUTS = ("sample", "reference")
REFERENCE_MATRIX_FILE = "reference_matrix.yaml"
REFERENCE_MAX_SAMPLES = 5
DEFAULT_BASELINE = "coverage/baseline.yaml"
DEFAULT_TIMEOUT_S = 60.0
# The first 3 samples of each cell keep the full sweep (7,338 cells, ~20k samples) within ~8 min
# warm on 2 cores; 6 samples took 17 min cold and ~7 min warm (eager only).
DEFAULT_MAX_SAMPLES = 3


@dataclasses.dataclass(frozen=True)
class SweepOptions:
    """How a sweep runs its units: workers, per-sample timeout, samples per cell, compile cache."""

    jobs: int = 1
    timeout: float = DEFAULT_TIMEOUT_S
    max_samples: int = DEFAULT_MAX_SAMPLES
    cache_dir: str | None = None  # JAX's persistent cache for the workers (None: the auditor's default)
    inputs: str = "sample"  # INPUTS: the OpInfos' sample_inputs, or their reference_inputs (spread)

    def problems(self) -> str | None:
        if self.jobs < 1:
            return f"--jobs must be at least 1, not {self.jobs}"
        if self.timeout <= 0:
            return f"--timeout must be positive, not {self.timeout:g}"
        if self.max_samples < 1:
            return f"--max-samples must be at least 1, not {self.max_samples}"
        return None


def shares(counts: dict[str, int]) -> dict:
    """{measured, pass, fallback} for one direction's status counts: the shares are fractions of
    the measured cells, i.e. without the UNMEASURED ones (unsupported, skip)."""
    measured = sum(n for status, n in counts.items() if status not in UNMEASURED)
    out: dict = {"measured": measured}
    if measured:
        out.update({s: round(counts.get(s, 0) / measured, 4) for s in ("pass", "fallback")})
    return out


def worst(statuses) -> str:
    statuses = list(statuses)
    return min(statuses, key=SEVERITY.index) if statuses else "skip"


@dataclasses.dataclass(frozen=True)
class TiedIndices:
    """An op that may order or pick tied elements (equal values in one slice along its dim) as it
    likes: PyTorch leaves that unspecified unless the sample passes stable=True.

    Forward: right when the values match CPU and the indices are a valid arrangement: the input
    gathered at them along the dim gives the returned values bit for bit (NaN-aware) and, with
    `permutation`, the indices along the dim are a permutation. Backward: the gradient lands on the
    elements the forward picked, so it is right when it matches CPU's up to a reordering within
    each group of tied input elements (sorted by value, then by gradient, in each slice).

    Positions: `values`/`indices` index the op's flattened outputs (values None: indices only,
    judged against the input gathered at CPU's indices; indices None: values only, nothing to
    relax forward); `dim` and `keepdim` index sample.args after the input, also read from kwargs
    by name; `default_dim` None: without a dim the op has no ties to choose among."""

    indices: int | None
    values: int | None = 0
    dim: int | None = 0  # position of dim among the args
    default_dim: int | None = -1
    keepdim: int | None = None  # position of keepdim among the args; None: the dim is kept (sort, topk)
    reduces: bool = False  # the output drops the dim unless keepdim (kthvalue, mode, median)
    permutation: bool = False


# OpInfo -> its tie rule. median/nanmedian without a dim return the value alone and spread its
# gradient evenly over the tied elements: nothing unspecified. max/min/argmax/argmin are not here:
# PyTorch specifies the first occurrence.
TIED_INDICES = {
    "sort": TiedIndices(values=0, indices=1, dim=0, permutation=True),
    "argsort": TiedIndices(values=None, indices=0, dim=0, permutation=True),
    "msort": TiedIndices(values=0, indices=None, dim=None, default_dim=0),  # backward only
    "topk": TiedIndices(values=0, indices=1, dim=1),
    "kthvalue": TiedIndices(values=0, indices=1, dim=1, keepdim=2, reduces=True),
    "mode": TiedIndices(values=0, indices=1, dim=0, keepdim=1, reduces=True),
    "median": TiedIndices(values=0, indices=1, dim=0, default_dim=None, keepdim=1, reduces=True),
    "nanmedian": TiedIndices(values=0, indices=1, dim=0, default_dim=None, keepdim=1, reduces=True),
}


class CpuArgs(NamedTuple):
    """Arguments PyTorch requires on CPU whatever the op's device ("tensor_indices_or_sections must
    be on cpu"): by name (an aten schema's arguments and out= tensors, an OpInfo sample's kwargs)
    and, for an OpInfo of the op's name, by position among the sample's args after the input."""

    names: tuple[str, ...]
    positions: tuple[int, ...] = ()


# Op (an aten op's name without namespace and overload, which is also its OpInfo's) -> its CPU-only
# arguments. The auditor moves every other tensor to jax: an OpInfo's samples (samples.to_device)
# and a direct trial's arguments (schema_samples).
CPU_ARGS: dict[str, CpuArgs] = {
    "tensor_split": CpuArgs(("tensor_indices_or_sections",), positions=(0,)),
    "randint_like": CpuArgs(("high",)),
    # _pack_padded_sequence.out's batch_sizes: its functional form returns it on CPU on any device
    "_pack_padded_sequence": CpuArgs(("out1",)),
}


def cpu_args(op: str) -> CpuArgs:
    """The CPU-only arguments of an OpInfo (`tensor_split`) or an aten overload (`aten::tensor_split.tensor_indices_or_sections`)."""
    return CPU_ARGS.get(op.split("::", 1)[-1].split(".")[0] if "::" in op else op, CpuArgs(()))


# Float64 arbitration (check.arbitrate). A `wrong` sample of these dtypes is run once more on CPU
# with its floating tensors widened (float16/bfloat16/float32 -> float64, complex64 -> complex128):
# the exact result of the narrow inputs, up to float64's rounding. It passes when jax is within
# tolerance of that result, or no farther from it than CPU is (a rounding-order difference that CPU
# loses or ties).
ARBITRATED_DTYPES = ("float32", "complex64", "float16", "bfloat16")
ARBITRATION_MEANING = (
    "Pass cells with samples whose values differ from CPU's beyond tolerance, while jax is within tolerance "
    "of the float64 result of the same inputs or no farther from it than CPU (a rounding-order difference); "
    "each reason gives both errors in tolerances."
)
# CPU's own worst error against the wide result, in tolerances, up to which it excuses as large an
# error of jax's. Rounding-order differences seen reach ~35 (matrix_exp float32: CPU 34x, jax 7.1x);
# beyond 100 CPU's result is not the wide one rounded but another computation (an overflow, a
# branch or a histogram bin crossed by rounding, half-precision accumulation: grid_sampler_2d
# float16 backward, CPU 5,000x), and jax then passes only within tolerance of the wide result.
ARBITRATION_CPU_BOUND = 100.0
# Where CPU is itself beyond tolerance of the wide result (its error > 1 tolerance), the tolerance
# no longer tells a right value from a wrong one there, and which of two summation orders lands
# farther from the exact result is rounding noise: jax passes within this factor of CPU's own error
# (up to ARBITRATION_CPU_BOUND). Measured: conv_transpose3d's float32 backward, the same jax
# kernel, was 1.4x tolerance from float64 compiled with XLA's backend optimization level 0 and 2.0x
# at the default, CPU 1.5x: without the slack its verdict flipped with a compile flag (issue 38).
ARBITRATION_ORDER_SLACK = 2.0
# OpInfos whose result depends smoothly on the dtype itself, not only on rounding: the wide run is
# another computation, never a judge. OpInfo -> why.
NOT_ARBITRATED: dict[str, str] = {
    "nextafter": "its result is the next value representable in the dtype",
    "nan_to_num": "it replaces infinities by the dtype's largest finite value",
    "nn.functional.rms_norm": "its default eps is the dtype's machine epsilon",
}
# OpInfos whose default cut-off on singular values is the dtype's epsilon times the size: where the
# cut-off decides, the narrow and the wide results differ by orders of magnitude, so the wide run
# judges only where CPU itself is within ARBITRATION_CPU_BOUND of it (the cut-off decided nothing).
_EPS_CUTOFF = "its default cut-off on singular values is the dtype's epsilon"
DTYPE_DEPENDENT: dict[str, str] = dict.fromkeys(
    (
        "linalg.pinv",
        "linalg.pinv.hermitian",
        "linalg.pinv.singular",
        "pinverse",
        "linalg.lstsq",
        "linalg.lstsq.grad_oriented",
        "linalg.matrix_rank",
        "linalg.matrix_rank.hermitian",
    ),
    _EPS_CUTOFF,
)
