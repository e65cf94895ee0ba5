"""The ops benchmarks/tpu_emulated_ulps.py measures: float32 torch calls a user commonly makes, each with
its inputs' domains and how its error is judged.

A `Case`: `fn(*tensors)`; `inputs`, one per argument: (lo, hi) for a float32 input drawn over that
domain (uniform, log-uniform magnitudes, and for elementwise cases the special values), or a callable
`(rng, shape) -> tensor` for another argument (a class index, a fixed weight); `shape`: (n,) for an
elementwise case, (rows, 100) for a row op; `kind`: how the forward and the input gradient are judged,
"ulps" (max ulps element by element, from CPU torch's float32) or "rel" (normwise relative error,
max |got - want| / max |want|: reductions, and gradients whose terms cancel); `grad`: the float inputs
whose gradient of sum() (of sum(w * out), w fixed in [0.5, 1.5], where that gradient is judged "rel")
is measured.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

F = torch.nn.functional
N, ROWS, COLS = 20_000, 200, 100
EW, ROW = (N,), (ROWS, COLS)

# The special functions another change rewrites (jaxdev/ops/special/functions.py): left out here.
LEFT_OUT = ("special.entr", "special.ndtri", "special.log_ndtr", "special.erfcx", "i0", "special.i1", "special.i1e")


@dataclasses.dataclass
class Case:
    fn: Callable
    inputs: tuple
    shape: tuple = EW
    kind: tuple = ("ulps", "ulps")
    grad: tuple | None = None  # None: every float input; (): no gradient

    def grads(self) -> tuple:
        floats = tuple(i for i, d in enumerate(self.inputs) if isinstance(d, tuple))
        return floats if self.grad is None else self.grad


def _classes(rng, shape):
    return torch.from_numpy(rng.integers(0, shape[-1], shape[:-1]))


def _probabilities(rng, shape):
    return torch.softmax(torch.from_numpy(rng.standard_normal(shape).astype("float32")), -1)


def _signs(rng, shape):
    return torch.from_numpy(rng.choice([-1.0, 1.0], shape).astype("float32"))


def _row_signs(rng, shape):
    return _signs(rng, shape[:-1])


def _labels(rng, shape):
    return torch.from_numpy(rng.integers(0, 2, shape).astype("float32"))


def _fixed(*shape, lo=0.5, hi=1.5):
    def make(rng, _):
        return torch.from_numpy(rng.uniform(lo, hi, shape).astype("float32"))

    return make


def unary() -> dict[str, Case]:
    domains = {
        "acos": (-1, 1), "acosh": (1, 1e4), "asin": (-1, 1), "asinh": (-1e4, 1e4), "atan": (-1e4, 1e4),
        "atanh": (-1, 1), "cos": (-100, 100), "cosh": (-88, 88), "sin": (-100, 100), "sinh": (-88, 88),
        "tan": (-10, 10), "tanh": (-12, 12), "exp": (-87, 88), "exp2": (-126, 127), "expm1": (-20, 88),
        "log": (0, 1e30), "log10": (0, 1e30), "log2": (0, 1e30), "log1p": (-1, 1e6), "sqrt": (0, 1e30),
        "rsqrt": (1e-30, 1e30), "reciprocal": (-1e30, 1e30), "square": (-1e15, 1e15), "sigmoid": (-80, 80),
        "logit": (0, 1), "erf": (-5, 5), "erfc": (-5, 10), "erfinv": (-1, 1), "lgamma": (0, 1e3),
        "digamma": (0.01, 1e3), "sinc": (-10, 10), "deg2rad": (-1e4, 1e4), "rad2deg": (-10, 10),
        "frac": (-1e4, 1e4), "ceil": (-1e4, 1e4), "floor": (-1e4, 1e4), "round": (-1e4, 1e4),
        "trunc": (-1e4, 1e4), "sign": (-10, 10), "neg": (-10, 10), "abs": (-10, 10), "angle": (-10, 10),
        "nan_to_num": (-1e30, 1e30),
    }  # fmt: skip
    cases = {f"torch.{name}": Case(getattr(torch, name), (dom,)) for name, dom in domains.items()}
    cases["torch.lgamma(neg)"] = Case(torch.lgamma, ((-10, 0),))
    cases["torch.polygamma(1)"] = Case(lambda t: torch.polygamma(1, t), ((0.01, 100),))
    cases["torch.polygamma(2)"] = Case(lambda t: torch.polygamma(2, t), ((0.01, 100),))
    cases["torch.mvlgamma(3)"] = Case(lambda t: torch.mvlgamma(t, 3), ((1.01, 100),))
    special = {
        "ndtr": (-10, 10), "i0e": (-50, 50), "bessel_j0": (-50, 50), "bessel_j1": (-50, 50),
        "bessel_y0": (0, 50), "bessel_y1": (0, 50), "modified_bessel_i0": (-50, 50),
        "modified_bessel_i1": (-50, 50), "modified_bessel_k0": (0, 50), "modified_bessel_k1": (0, 50),
        "scaled_modified_bessel_k0": (0, 50), "scaled_modified_bessel_k1": (0, 50),
        "spherical_bessel_j0": (-50, 50), "airy_ai": (-10, 10), "expit": (-80, 80),
    }  # fmt: skip
    no_grad = ("bessel", "airy", "spherical")
    for name, dom in special.items():
        grad = () if any(name.startswith(p) or p in name for p in no_grad) else None
        cases[f"special.{name}"] = Case(getattr(torch.special, name), (dom,), grad=grad)
    for name in ("ceil", "floor", "round", "trunc", "sign", "frac", "angle"):
        cases[f"torch.{name}"].grad = ()
    return cases


def binary() -> dict[str, Case]:
    wide, pos = (-1e3, 1e3), (0.01, 100)
    cases = {
        "torch.add": Case(torch.add, (wide, wide)),
        "torch.mul": Case(torch.mul, (wide, wide)),
        "torch.div": Case(torch.div, (wide, wide)),
        "torch.div(floor)": Case(lambda a, b: torch.div(a, b, rounding_mode="floor"), (wide, wide), grad=()),
        "torch.div(trunc)": Case(lambda a, b: torch.div(a, b, rounding_mode="trunc"), (wide, wide), grad=()),
        "torch.remainder": Case(torch.remainder, (wide, (-100, 100)), grad=(0,)),
        "torch.fmod": Case(torch.fmod, (wide, (-100, 100)), grad=(0,)),
        "torch.atan2": Case(torch.atan2, (wide, wide)),
        "torch.pow": Case(torch.pow, (pos, (-10, 10))),
        "torch.pow(x, 2.5)": Case(lambda t: torch.pow(t, 2.5), ((0, 1e10),)),
        "torch.pow(x, -1.5)": Case(lambda t: torch.pow(t, -1.5), ((1e-10, 1e10),)),
        "torch.pow(x, 0.5)": Case(lambda t: torch.pow(t, 0.5), ((0, 1e30),)),
        "torch.pow(x, 3)": Case(lambda t: torch.pow(t, 3), ((-1e10, 1e10),)),
        "torch.pow(2.7, x)": Case(lambda t: torch.pow(2.7, t), ((-80, 80),)),
        "torch.hypot": Case(torch.hypot, (wide, wide)),
        "torch.logaddexp": Case(torch.logaddexp, ((-100, 100), (-100, 100))),
        "torch.logaddexp2": Case(torch.logaddexp2, ((-100, 100), (-100, 100))),
        "torch.xlogy": Case(torch.xlogy, ((-10, 10), (0, 1e3))),
        "special.xlog1py": Case(torch.special.xlog1py, ((-10, 10), (-1, 1e3))),
        "torch.copysign": Case(torch.copysign, (wide, wide), grad=(0,)),
        "torch.fmax": Case(torch.fmax, (wide, wide)),
        "torch.lerp": Case(torch.lerp, (wide, wide, (0, 1))),
        "torch.addcdiv": Case(lambda a, b, c: torch.addcdiv(a, b, c, value=0.5), (wide, wide, wide)),
        "torch.addcmul": Case(lambda a, b, c: torch.addcmul(a, b, c, value=0.5), (wide, wide, wide)),
        "special.gammainc": Case(torch.special.gammainc, ((0.01, 100), (0, 200)), grad=(1,)),
        "special.gammaincc": Case(torch.special.gammaincc, ((0.01, 100), (0, 200)), grad=(1,)),
        "special.zeta": Case(torch.special.zeta, ((1.1, 20), (0.1, 10)), grad=()),
    }
    return cases


def _rows(fn, kind=("ulps", "rel"), inputs=((-30, 30),), grad=None):
    return Case(fn, inputs, shape=ROW, kind=kind, grad=grad)


def reductions() -> dict[str, Case]:
    rel = ("rel", "rel")
    return {
        "torch.sum": _rows(lambda t: t.sum(-1), rel),
        "torch.mean": _rows(lambda t: t.mean(-1), rel),
        "torch.prod": _rows(lambda t: t.prod(-1), rel, ((0.5, 1.5),)),
        "torch.var": _rows(lambda t: t.var(-1), rel),
        "torch.std": _rows(lambda t: t.std(-1), rel),
        "torch.var(correction=0)": _rows(lambda t: t.var(-1, correction=0), rel),
        "torch.std_mean": _rows(lambda t: torch.std_mean(t, -1)[0], rel),
        "torch.norm": _rows(lambda t: t.norm(dim=-1), rel),
        "linalg.vector_norm(1)": _rows(lambda t: torch.linalg.vector_norm(t, 1, -1), rel),
        "linalg.vector_norm(3)": _rows(lambda t: torch.linalg.vector_norm(t, 3, -1), rel),
        "linalg.vector_norm(inf)": _rows(lambda t: torch.linalg.vector_norm(t, float("inf"), -1), rel),
        "linalg.vector_norm(0.5)": _rows(lambda t: torch.linalg.vector_norm(t, 0.5, -1), rel, ((0.1, 10),)),
        "torch.logsumexp": _rows(lambda t: torch.logsumexp(t, -1), ("ulps", "ulps")),
        "torch.softmax": _rows(lambda t: torch.softmax(t, -1)),
        "torch.log_softmax": _rows(lambda t: torch.log_softmax(t, -1)),
        "F.softmin": _rows(lambda t: F.softmin(t, -1)),
        "torch.logcumsumexp": _rows(lambda t: torch.logcumsumexp(t, -1)),
        "torch.cumsum": _rows(lambda t: torch.cumsum(t, -1), rel),
        "torch.cumprod": _rows(lambda t: torch.cumprod(t, -1), rel, ((0.5, 1.5),)),
        "torch.dist": _rows(lambda a, b: torch.dist(a, b), rel, ((-30, 30), (-30, 30))),
        "torch.renorm": _rows(lambda t: torch.renorm(t, 2, 0, 5.0), rel),
        "torch.nanmean": _rows(lambda t: torch.nanmean(t, -1), rel),
        "torch.amax": _rows(lambda t: torch.amax(t, -1), rel),
        "F.scaled_dot_product_attention": Case(
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v), ((-3, 3),) * 3, (2, 4, 50, 16), ("rel", "rel")
        ),
    }


def activations() -> dict[str, Case]:
    act = {
        "gelu": (F.gelu, (-5, 12)), "gelu(tanh)": (lambda t: F.gelu(t, approximate="tanh"), (-5, 12)),
        "silu": (F.silu, (-80, 80)), "mish": (F.mish, (-30, 30)), "softplus": (F.softplus, (-30, 30)),
        "softplus(beta=2)": (lambda t: F.softplus(t, 2.0, 10.0), (-30, 30)), "elu": (F.elu, (-30, 30)),
        "selu": (F.selu, (-30, 30)), "celu": (lambda t: F.celu(t, 0.5), (-30, 30)),
        "logsigmoid": (F.logsigmoid, (-90, 90)), "hardswish": (F.hardswish, (-5, 5)),
        "hardsigmoid": (F.hardsigmoid, (-5, 5)), "hardtanh": (F.hardtanh, (-3, 3)), "relu6": (F.relu6, (-3, 9)),
        "leaky_relu": (F.leaky_relu, (-30, 30)), "tanhshrink": (F.tanhshrink, (-12, 12)),
        "softsign": (F.softsign, (-1e4, 1e4)), "softshrink": (F.softshrink, (-3, 3)),
        "hardshrink": (F.hardshrink, (-3, 3)), "relu": (F.relu, (-3, 3)),
        "rrelu(eval)": (lambda t: F.rrelu(t, training=False), (-30, 30)),
        "threshold": (lambda t: F.threshold(t, 0.5, -1.0), (-3, 3)),
    }  # fmt: skip
    cases = {f"F.{name}": Case(fn, (dom,)) for name, (fn, dom) in act.items()}
    cases["F.glu"] = _rows(lambda t: F.glu(t, -1), ("ulps", "ulps"))
    cases["F.prelu"] = Case(lambda t, w: F.prelu(t.reshape(-1, 4, 5), w), ((-30, 30), _fixed(4)))
    return cases


def _img(fn, inputs=((-3, 3),), kind=("rel", "rel"), grad=None):
    return Case(fn, inputs, shape=(8, 16, 5, 5), kind=kind, grad=grad)


def norms() -> dict[str, Case]:
    c16 = _fixed(16)
    return {
        "F.layer_norm": _rows(lambda t, w, b: F.layer_norm(t, (COLS,), w, b), ("rel", "rel"),
                              ((-3, 3), _fixed(COLS), _fixed(COLS, lo=-1, hi=1)), (0,)),
        "F.rms_norm": _rows(lambda t, w: F.rms_norm(t, (COLS,), w), ("rel", "rel"), ((-3, 3), _fixed(COLS)), (0,)),
        "F.group_norm": _img(lambda t, w, b: F.group_norm(t, 4, w, b), ((-3, 3), c16, c16), grad=(0,)),
        "F.batch_norm(train)": _img(lambda t, w, b: F.batch_norm(t, None, None, w, b, training=True),
                                    ((-3, 3), c16, c16), grad=(0,)),
        "F.batch_norm(eval)": _img(lambda t, m, v: F.batch_norm(t, m, v, training=False),
                                   ((-3, 3), _fixed(16, lo=-1, hi=1), c16), ("ulps", "ulps"), (0,)),
        "F.instance_norm": _img(F.instance_norm),
        "F.local_response_norm": _img(lambda t: F.local_response_norm(t, 3)),
        "F.normalize": _rows(lambda t: F.normalize(t, dim=-1), ("ulps", "rel")),
        "F.cosine_similarity": _rows(lambda a, b: F.cosine_similarity(a, b, -1), ("rel", "rel"), ((-3, 3),) * 2),
        "F.pairwise_distance": _rows(F.pairwise_distance, ("rel", "rel"), ((-3, 3),) * 2),
        "F.pdist": Case(lambda t: F.pdist(t.reshape(50, -1)), ((-3, 3),), (50, 20), ("rel", "rel")),
        "torch.cdist": Case(lambda a, b: torch.cdist(a, b), ((-3, 3),) * 2, (40, 20), ("rel", "rel")),
    }  # fmt: skip


def _none(fn, inputs, grad=None):
    """A loss per element (reduction='none'): judged in ulps."""
    return Case(fn, inputs, grad=grad)


def losses() -> dict[str, Case]:
    logits, unit, wide, rel = (-10, 10), (0, 1), (-30, 30), ("rel", "rel")
    cases = {
        "F.cross_entropy": _rows(lambda t, y: F.cross_entropy(t, y), rel, (logits, _classes)),
        "F.cross_entropy(none)": _rows(lambda t, y: F.cross_entropy(t, y, reduction="none"), rel, (logits, _classes)),
        "F.cross_entropy(smooth)": _rows(lambda t, y: F.cross_entropy(t, y, label_smoothing=0.1), rel,
                                         (logits, _classes)),
        "F.cross_entropy(probs)": _rows(lambda t, p: F.cross_entropy(t, p), rel, (logits, _probabilities)),
        "F.nll_loss": _rows(lambda t, y: F.nll_loss(t, y), rel, ((-30, 0), _classes)),
        "F.kl_div": _rows(lambda t, p: F.kl_div(t, p, reduction="batchmean"), rel, ((-30, 0), _probabilities)),
        "F.kl_div(none)": _none(lambda t, p: F.kl_div(t, p, reduction="none"), ((-30, 0), unit)),
        "F.kl_div(log_target)": _none(lambda t, p: F.kl_div(t, p, reduction="none", log_target=True),
                                      ((-30, 0), (-30, 0))),
        "F.binary_cross_entropy(none)": _none(lambda p, y: F.binary_cross_entropy(p, y, reduction="none"),
                                              (unit, _labels), (0,)),
        "F.binary_cross_entropy": _rows(lambda p, y: F.binary_cross_entropy(p, y), rel, (unit, _labels)),
        "F.bce_with_logits(none)": _none(
            lambda t, y: F.binary_cross_entropy_with_logits(t, y, reduction="none"), (wide, _labels), (0,)),
        "F.bce_with_logits(pos_weight)": _none(
            lambda t, y: F.binary_cross_entropy_with_logits(t, y, reduction="none", pos_weight=torch.tensor(3.0)),
            (wide, _labels), (0,)),
        "F.bce_with_logits": _rows(F.binary_cross_entropy_with_logits, rel, (wide, _labels)),
        "F.smooth_l1_loss(none)": _none(lambda a, b: F.smooth_l1_loss(a, b, reduction="none", beta=0.5),
                                        ((-3, 3),) * 2),
        "F.huber_loss(none)": _none(lambda a, b: F.huber_loss(a, b, reduction="none", delta=0.5), ((-3, 3),) * 2),
        "F.smooth_l1_loss": _rows(F.smooth_l1_loss, rel, ((-3, 3),) * 2),
        "F.huber_loss": _rows(F.huber_loss, rel, ((-3, 3),) * 2),
        "F.mse_loss": _rows(F.mse_loss, rel, ((-3, 3),) * 2),
        "F.l1_loss": _rows(F.l1_loss, rel, ((-3, 3),) * 2),
        "F.poisson_nll_loss(none)": _none(lambda a, b: F.poisson_nll_loss(a, b, reduction="none"), ((-10, 10), unit)),
        "F.gaussian_nll_loss(none)": _none(lambda a, b, v: F.gaussian_nll_loss(a, b, v, reduction="none"),
                                           ((-3, 3), (-3, 3), (0.01, 10))),
        "F.soft_margin_loss(none)": _none(lambda t, y: F.soft_margin_loss(t, y, reduction="none"), (wide, _signs),
                                          (0,)),
        "F.multilabel_soft_margin_loss": _rows(F.multilabel_soft_margin_loss, rel, (wide, _labels)),
        "F.margin_ranking_loss": _rows(lambda a, b, y: F.margin_ranking_loss(a, b, y), rel,
                                       ((-3, 3), (-3, 3), _signs)),
        "F.hinge_embedding_loss": _rows(F.hinge_embedding_loss, rel, ((-3, 3), _signs)),
        "F.cosine_embedding_loss": _rows(F.cosine_embedding_loss, rel, ((-3, 3), (-3, 3), _row_signs)),
        "F.triplet_margin_loss": _rows(F.triplet_margin_loss, rel, ((-3, 3),) * 3),
        "F.multi_margin_loss": _rows(F.multi_margin_loss, rel, ((-3, 3), _classes)),
    }  # fmt: skip
    return cases


def all_cases() -> dict[str, Case]:
    return {**unary(), **binary(), **reductions(), **activations(), **norms(), **losses()}
