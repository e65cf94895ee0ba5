"""The fused optimizer steps (`torch.optim.Adam/AdamW/SGD/Adagrad(fused=True)`) as one XLA program each.

`aten::_fused_adam_`, `_fused_adamw_`, `_fused_sgd_` and `_fused_adagrad_` (each with a float lr and a
Tensor lr) update every parameter of a group and its state in one call. Their CPU kernels
(aten/src/ATen/native/cpu/Fused*Kernel.cpp) loop over the tensors; here the call is one program over
all the lists, each result written into its tensor's storage (the old buffers donated when nothing
else holds them), as jaxdev/ops/foreach.py writes an in-place foreach op. The functional and out=
overloads (`_fused_adam`, `.out`) are PyTorch's CompositeExplicitAutograd kernels over these.

Index i computes what CPU's kernel computes for its tensor, in the same order:
* in the opmath dtype (float32 for float16/bfloat16 parameters, whose values are rounded once, at each
  store, while the computation goes on with the unrounded float), with CPU's constants rounded to it;
* the per-step scalars (bias corrections, Adagrad's decayed lr) in float64 from the step tensors'
  values, for every tensor at once inside the program: no step count, lr tensor or found_inf is read
  back to the host;
* grad_scale divides the gradients first, and the unscaled gradients are stored back (CPU does so);
  found_inf == 1 leaves every tensor as it was (CPU returns before touching any).
On XLA's CPU backend it also rounds where CPU's kernel rounds (_exact): the products CPU's compiler
fuses into the sum that uses them (vec::fmadd, and its AVX2/AVX512 builds' contractions: `v * beta2 +
(1 - beta2) * g * g` is one FMA there) with one rounding, the others with two, and a division by one
number as a division. So float32 and bfloat16 results are CPU's bit for bit wherever CPU's vector loop
computes them. Its scalar loop (a tensor's last numel % lanes elements) rounds some sums differently
(an ulp, not pinned down here). Where CPU's half-precision vector and scalar loops take different
constants (Adagrad rounds some to the half dtype in the vector loop only), each element takes its
loop's. CPU's fused SGD never stores a half parameter's vector-loop elements (FusedSGDKernel.cpp's half
path lacks the store: a PyTorch bug); here every element is computed as its scalar loop computes them.

One dtype per call: torch.optim groups tensors by device and dtype before calling these. A call that
mixes dtypes is refused; one with a tensor that is not its whole storage, or traced by torch.compile,
runs on CPU through the fallback.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import torch
from jax import lax

from jaxdev import fallback, tensor
from jaxdev.ops import kit
from jaxdev.ops.kit import capabilities, cpu_numerics
from jaxdev.ops.kit.tensor_lists import boxes, may_take, store, whole
from jaxdev.ops.registry import aten, register

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


# --- CPU's arithmetic ----------------------------------------------------------------------------------


def _exact() -> bool:
    """Whether a program follows CPU's roundings where XLA would compute otherwise: on XLA's CPU backend,
    where results are compared with CPU's fused=True bit for bit (and cost 1.6x the plain formulas).
    On an accelerator the plain float32 formulas run (an FMA wherever XLA forms one), as CUDA's own
    fused kernels compute theirs, at the speed of a hand-written step: a TPU's division and square
    root are not CPU's anyway, and its float64 is emulated."""
    return capabilities.platform() == "cpu"


def _to_float32(x):
    """A float64 value rounded to float32 and pinned there (reduce_precision), so that XLA cannot drop
    the rounding when the value is widened again (it removes a float64 -> float32 -> float64 convert
    pair). Subnormal results flush to zero, as every float32 operation of an XLA:CPU program does;
    cpu_numerics.round_to keeps them, at 15 operations a rounding (a 2x slower step here)."""
    return lax.reduce_precision(x, 8, 23).astype(jnp.float32)


def _fma(a, b, c):
    """a * b + c rounded once, as CPU's fmadd and its compiler's contractions compute it. XLA's CPU
    backend contracts some such sums, but not all as CPU's compiler does (a negated product, a sum of
    two products), so a float32 one runs in float64, its rounding pinned (reduce_precision): XLA drops
    a float64 -> float32 -> float64 convert pair, and a chain of these (SGD's momentum, then nesterov's
    step) would otherwise stay unrounded inside a larger program (fused eager)."""
    if a.dtype != jnp.float32 or not _exact():
        return a * b + c  # float64 (XLA contracts it), or the plain formula (_exact)
    a, b, c = jnp.broadcast_arrays(a, b, c)
    wide = cpu_numerics.wide_dtype(a.dtype)
    return _to_float32(a.astype(wide) * b.astype(wide) + c.astype(wide))


def _over(x, d):
    """x / d for one number d, correctly rounded as CPU divides: XLA turns a division by a broadcast
    number into a multiplication by its reciprocal (an ulp off in 7% of elements), but not a division
    by a full array it cannot see through."""
    if not _exact():
        return x / d.astype(x.dtype)
    return x / cpu_numerics.opaque(jnp.full_like(x, d.astype(x.dtype)))


def _unfused(a, b, c):
    """a * b + c with the product rounded first, as CPU computes a product its compiler does not fuse
    into the sum that follows. XLA fuses them whatever the program says (an optimization barrier, a
    bitcast round trip or a float64 -> float32 -> float64 convert pair included), so for float32 both
    steps run in float64: the exact product rounded to float32's grid (reduce_precision), then the sum
    of two float32 values, rounded once; no float32 FMA can form."""
    if a.dtype != jnp.float32 or not _exact():
        return a * b + c
    wide = cpu_numerics.wide_dtype(a.dtype)
    product = lax.reduce_precision(a.astype(wide) * b.astype(wide), 8, 23)
    return _to_float32(product + c.astype(wide))


def _stored(x, jdt):
    """x (opmath) as the tensor's dtype stores it: rounded once (c10's float -> half conversion)."""
    if x.dtype == jdt:
        return x
    return cpu_numerics.round_to(jdt)(x).astype(jdt)


def _lanes(itemsize: int) -> int:
    """Elements of `itemsize` bytes in one of CPU's Vectorized registers: 64 bytes on an AVX512 build, 32
    otherwise (AVX2, and the default build's Vectorized)."""
    width = 64 if torch.backends.cpu.get_cpu_capability() == "AVX512" else 32
    return width // itemsize


def _scalar_loop(shape, itemsize: int):
    """Where CPU's fused kernel computes an element with its scalar loop: the last numel % lanes elements
    (its per-thread chunks are whole cache lines, so only the tensor's end is left over)."""
    n = int(np.prod(shape, dtype=np.int64))
    tail = n % _lanes(itemsize)
    return (jnp.arange(n) >= n - tail).reshape(shape)


# --- one index of each step ----------------------------------------------------------------------------
# x: the index's tensors in opmath by list name ("self", "grads", ...; "grads" already unscaled), its
# numbers from its step count (_adam_steps, _adagrad_steps: "step_size", "bc2_sqrt", "clr", in the
# wide dtype) and `half_vector` (see _scalar_loop; None but for half tensors where the loops differ);
# s: the call's numbers in the wide dtype; f: the call's flags. Returns the written lists' new values.


def _half_const(value, x, f):
    """A number as the element's loop takes it: `value` in opmath, or (a half tensor's vector loop)
    rounded to the half dtype first."""
    c = x["self"].dtype
    exact = value.astype(c)
    if x["half_vector"] is None:
        return exact
    return jnp.where(x["half_vector"], _stored(exact, f["dtype"]).astype(c), exact)


def _adam_index(x, s, f):
    """Adam / AdamW (FusedAdamKernel.cpp's adam_math)."""
    p, g, m, v = x["self"], x["grads"], x["exp_avgs"], x["exp_avg_sqs"]
    c = p.dtype
    if f["maximize"]:
        g = -g
    decay = None
    if f["decay"]:
        if f["adamw"]:
            decay = (1 - cpu_numerics.opaque(s["lr"] * s["weight_decay"])).astype(c)  # p *= 1 - lr * wd
        else:
            g = _fma(p, s["weight_decay"].astype(c), g)
    weight = (1 - s["beta1"]).astype(c)  # exp_avg.lerp_(grad, 1 - beta1), in the form CPU's lerp picks
    small = jnp.abs(weight) < 0.5
    m = _fma(jnp.where(small, weight, weight - 1), g - m, jnp.where(small, m, g))
    v = _fma((1 - s["beta2"]).astype(c) * g, g, v * s["beta2"].astype(c))
    out = {"exp_avgs": m, "exp_avg_sqs": v}
    if f["amsgrad"]:
        v = out["max_exp_avg_sqs"] = jnp.maximum(x["max_exp_avg_sqs"], v)
    denom = _over(jnp.sqrt(v), x["bc2_sqrt"]) + s["eps"].astype(c)
    update = (-x["step_size"]).astype(c) * m / denom
    out["self"] = p + update if decay is None else _unfused(p, decay, update)
    return out


def _sgd_index(x, s, f):
    """SGD (FusedSGDKernel.cpp's sgd_math)."""
    p, g = x["self"], x["grads"]
    out = {}
    if f["maximize"]:
        g = -g
    if f["decay"]:
        g = _fma(p, _half_const(s["weight_decay"], x, f), g)
    if f["momentum"]:
        momentum = _half_const(s["momentum"], x, f)
        if f["first"]:
            buf = g
        else:
            buf = _fma(_half_const(1 - s["dampening"], x, f), g, x["momentum_buffer_list"] * momentum)
        out["momentum_buffer_list"] = buf
        g = _fma(buf, momentum, g) if f["nesterov"] else buf
    out["self"] = _fma(g, (-s["lr"]).astype(p.dtype), p)
    return out


def _adam_steps(steps, s):
    """Adam's per-tensor numbers from the step counts (FusedAdamKernel.cpp, in double)."""
    bc1 = 1 - jnp.power(s["beta1"], steps)
    return {"step_size": s["lr"] / bc1, "bc2_sqrt": jnp.sqrt(1 - jnp.power(s["beta2"], steps))}


def _adagrad_steps(steps, s):
    """Adagrad's per-tensor lr, decayed by the step count (FusedAdagradKernel.cpp, in double)."""
    return {"clr": s["lr"] / (1 + cpu_numerics.opaque((steps - 1) * s["lr_decay"]))}


def _adagrad_index(x, s, f):
    """Adagrad (FusedAdagradKernel.cpp's adagrad_math), its lr decayed by the step in float64."""
    p, g, clr = x["self"], x["grads"], x["clr"]
    if f["maximize"]:
        g = -g
    if f["decay"]:
        g = _fma(p, _half_const(s["weight_decay"], x, f), g)
    total = _fma(g, g, x["state_sums"])
    std = jnp.sqrt(total) + _half_const(s["eps"], x, f)
    return {"self": p - _half_const(clr, x, f) * g / std, "state_sums": total}


# family -> (index function, its list arguments in order, its number arguments in order, whether its
#            vector and scalar loops differ for half tensors, its per-tensor numbers from the step counts)
_FAMILIES = {
    "adam": (
        _adam_index,
        ("self", "grads", "exp_avgs", "exp_avg_sqs", "max_exp_avg_sqs", "state_steps"),
        ("beta1", "beta2", "weight_decay", "eps"),
        False,
        _adam_steps,
    ),
    "sgd": (
        _sgd_index,
        ("self", "grads", "momentum_buffer_list"),
        ("weight_decay", "momentum", "dampening"),
        False,
        None,
    ),
    "adagrad": (
        _adagrad_index,
        ("self", "grads", "state_sums", "state_steps"),
        ("lr_decay", "weight_decay", "eps"),
        True,
        _adagrad_steps,
    ),
}


# --- one program -----------------------------------------------------------------------------------------


@kit.jitted(maxsize=256, donate=lambda family, flags, written, donate: (0,) if donate else ())
def _program(family: str, flags: tuple, written: tuple, donate: bool):
    """run(written lists, read lists, lr, numbers, grad_scale, found_inf) -> the written lists' new
    arrays: every index's step in one program."""
    index, _, number_names, halves_differ, per_step = _FAMILIES[family]
    f = dict(flags)

    def run(outs, ins, lr, numbers, scale, found):
        wide = cpu_numerics.wide_dtype(jnp.float32)
        s = {k: numbers[i].astype(wide) for i, k in enumerate(number_names)}
        s["lr"] = jnp.asarray(lr).reshape(()).astype(wide)
        lists = {**dict(zip(written, outs)), **ins}
        skip = None if found is None else found.reshape(()) == 1  # CPU's test: *found_inf_ptr == 1.0
        per = {}
        if per_step is not None:
            # every tensor's numbers at once, kept apart behind a barrier: XLA would otherwise fuse each
            # tensor's pow into its elementwise loop and compute it for every element (2x the step)
            steps = jnp.stack([t.reshape(()).astype(jnp.float32) for t in lists["state_steps"]])  # item<float>()
            per = cpu_numerics.opaque(per_step(steps.astype(wide), s))
        results = {k: [] for k in written}
        for i, p in enumerate(lists["self"]):
            c = kit.opmath(p.dtype)
            x = {k: lists[k][i].astype(c) for k in lists if k != "state_steps"}
            x.update({k: v[i] for k, v in per.items()})
            if scale is not None:
                x["grads"] = _over(x["grads"], scale.reshape(()))
            half = halves_differ and c != p.dtype
            x["half_vector"] = ~_scalar_loop(p.shape, p.dtype.itemsize) if half else None
            new = index(x, s, {**f, "dtype": p.dtype})
            new["grads"] = x["grads"]  # stored only where grad_scale unscaled it
            for k in written:
                r = _stored(new[k], p.dtype)
                results[k].append(r if skip is None else jnp.where(skip, lists[k][i], r))
        return [results[k] for k in written]

    return run


# --- one call --------------------------------------------------------------------------------------------


def _flags(family: str, a: dict) -> dict:
    flags = {"maximize": bool(a["maximize"]), "decay": a["weight_decay"] != 0}
    if family == "adam":
        flags.update(amsgrad=bool(a["amsgrad"]), adamw=a["adamw"])
    elif family == "sgd":
        flags.update(momentum=a["momentum"] != 0, first=bool(a["is_first_step"]), nesterov=bool(a["nesterov"]))
    return flags


def _lists(family: str, a: dict, flags: dict) -> dict:
    """The call's tensor lists by name, optional ones left out where empty; CPU's length checks."""
    names = _FAMILIES[family][1]
    n = len(a["self"])
    lists = {}
    for k in names:
        given = list(a[k])
        optional = {"max_exp_avg_sqs": "amsgrad", "momentum_buffer_list": "momentum"}.get(k)
        expected = n if optional is None or flags[optional] else 0
        if len(given) != expected:
            raise RuntimeError(
                f"{family} with fused=True: {k} holds {len(given)} tensors where {expected} were expected"
            )
        if given:
            lists[k] = given
    return lists


def _one_dtype(lists: dict):
    """The call's dtype, refusing a call that mixes them (torch.optim groups by device and dtype)."""
    found = {t.dtype for k, ts in lists.items() if k != "state_steps" for t in ts}
    if len(found) != 1:
        names = ", ".join(sorted(str(d) for d in found))
        raise RuntimeError(
            f"jaxdev's fused optimizer step takes one dtype per call (torch.optim groups tensors by device and dtype), not {names}"
        )
    (dtype,) = found
    if dtype not in _FLOATS:
        raise RuntimeError(f'fused optimizer step: "{dtype}" is not a floating dtype CPU\'s kernels take')
    return dtype


def _whole_lists(lists: dict) -> bool:
    """Every tensor its whole storage, each index's shapes alike, the steps single numbers, and no
    array in two places (a written tensor on another's storage: the loop's order would show)."""
    shapes = [tuple(t.shape) for t in lists["self"]]
    ids = []
    for k, ts in lists.items():
        for t, shape in zip(ts, shapes):
            array = whole(t)
            if array is None or (tuple(t.shape) != shape if k != "state_steps" else t.numel() != 1):
                return False
            ids.append(id(array))
    return len(set(ids)) == len(ids)


def _small(t):
    """grad_scale / found_inf / a tensor lr as a program input: a jax tensor's array, a CPU tensor's value."""
    if t is None:
        return None
    if tensor.is_jax(t):
        return whole(t)
    return np.asarray(t.detach().reshape(-1)[0].item(), np.float64 if t.dtype == torch.float64 else np.float32)


def _step(family: str, a: dict):
    """The call as one program, or None where the CPU fallback must run it."""
    if not may_take(a["self"], inplace=True):
        return None
    flags = _flags(family, a)
    lists = _lists(family, a, flags)
    dtype = _one_dtype(lists)
    flags["dtype"] = str(dtype)
    if not _whole_lists(lists):
        return None
    lr = a["lr"]
    lr = _small(lr) if isinstance(lr, torch.Tensor) else np.float64(lr)
    scale, found = _small(a.get("grad_scale")), _small(a.get("found_inf"))
    if any(
        v is None
        for v, given in ((lr, True), (scale, a.get("grad_scale")), (found, a.get("found_inf")))
        if given is not None
    ):
        return None
    written = tuple(k for k in lists if k not in ("grads", "state_steps")) + (("grads",) if scale is not None else ())
    read = {k: [whole(t) for t in lists[k]] for k in lists if k not in written}
    held = [boxes(lists[k]) for k in written]
    donate = all(tensor.sole_holder(b) for bs in held for b in bs)
    outs = [[b.array for b in bs] for bs in held]
    numbers = np.asarray([a[k] for k in _FAMILIES[family][2]], np.float64)
    program = _program(family, tuple(sorted(flags.items())), written, donate)
    results = program(outs, read, lr, numbers, scale, found)
    for k, bs, rs in zip(written, held, results):
        store(lists[k], bs, rs)
    return True


# --- registration --------------------------------------------------------------------------------------


_NOT_TAKEN = "jax kernel for a tensor that is part of a larger storage, placed over a mesh or traced"


def _kernel(op, family: str, adamw: bool = False):
    names = _FAMILIES[family][1]

    def kernel(*args, **kwargs):
        a = {**dict(zip(names, args)), **kwargs, "adamw": adamw}
        a.setdefault("momentum_buffer_list", [])
        if _step(family, a) is None:  # the fallback's warning says what the program did not take
            fallback.run_on_cpu_lacking(op, _NOT_TAKEN, args, kwargs)

    return kernel


for _packet, _family, _adamw in (
    (aten._fused_adam_, "adam", False),
    (aten._fused_adamw_, "adam", True),
    (aten._fused_sgd_, "sgd", False),
    (aten._fused_adagrad_, "adagrad", False),
):
    for _overload in ("default", "tensor_lr"):
        _op = getattr(_packet, _overload)
        register(_op)(_kernel(_op, _family, _adamw))
