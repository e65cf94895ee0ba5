"""The kernel author's toolkit: what every op family uses, in one place.

Families import this module and the registry, never each other. It holds:
* arguments: `J` (a tensor argument's jax.Array), `value` (tensors or Python scalars),
  `any_device` (index tensors may live on CPU, as with CUDA), `wrap_dim` / `axes` (PyTorch's dim
  rules and errors);
* dtypes: `opmath` (the dtype a half-precision op computes in), `float_of`, `cast` (as copy_ casts),
  and the names PyTorch prints (`dtypes.scalar_name`: "Float", `dtypes.name`: "float32");
* the one jit policy, `jitted`: a kernel body is built once per static signature and jitted;
* `product_precision` / `matmul`: products at the device's precision;
* `apply`: run an elementwise body on tensors cast to a compute dtype, cast to the result dtype;
* `sort_key` / `stable_sort`: PyTorch's order (NaN last, -0.0 == 0.0, stable ties);
* `add_at` / `multiply_at` / `check_index_bounds`: accumulation and bounds as PyTorch does them.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, native, tensor, tracing
from jaxdev.dtypes import opmath
from jaxdev.ops.kit.cpu_numerics import narrowed

Tensor = torch.Tensor

__all__ = [
    "J",
    "accumulate_dtype",
    "add_at",
    "any_device",
    "apply",
    "axes",
    "cast",
    "check_index_bounds",
    "compiled",
    "each_location_once",
    "float_of",
    "jitted",
    "matmul",
    "multiply_at",
    "on_views",
    "opmath",
    "product_precision",
    "sort_key",
    "stable_sort",
    "value",
    "widened_product_precision",
    "wrap_dim",
    "zeros",
]


# --- arguments -------------------------------------------------------------------------------------


def J(x) -> jax.Array:
    """The jax.Array of a tensor argument. A 0-dim CPU tensor is accepted as a scalar, as CUDA does."""
    if not x.is_cpu:
        return tensor.read(x)  # a tensor of another device fails there with a clear error
    if x.dim() == 0:
        return jnp.asarray(x.item(), dtype=dtypes.to_jax_dtype(x.dtype))
    raise tensor.mixed_devices(x.device)


def value(x):
    """Tensor -> jax array; Python scalars pass through (cast inside the jitted body)."""
    return J(x) if isinstance(x, torch.Tensor) else x


def any_device(t: torch.Tensor) -> jax.Array:
    """Index tensors may live on CPU, as with CUDA."""
    return J(t) if t.device.type == "jax" else tensor.from_cpu(t)


def wrap_dim(d: int, ndim: int) -> int:
    lo, hi = (-1, 0) if ndim == 0 else (-ndim, ndim - 1)
    if not lo <= d <= hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {d})")
    return d % max(ndim, 1)


def axes(dim, ndim: int) -> tuple[int, ...]:
    """`dim` (None, int, or a list; empty means all) as sorted non-negative axes."""
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return tuple(range(ndim))
    dims = [dim] if isinstance(dim, int) else list(dim)
    out = tuple(sorted({wrap_dim(d, ndim) for d in dims}))
    if len(out) != len(dims):
        raise RuntimeError(f"dim {dims[0]} appears multiple times in the list of dims")
    return out if ndim > 0 else ()


def accumulate_dtype(dtype: torch.dtype, requested: torch.dtype | None) -> torch.dtype:
    """What sum/prod/cumsum accumulate and return: `dtype=` if given, int64 for integers and bool."""
    if requested is not None:
        return requested
    return torch.int64 if not (dtype.is_floating_point or dtype.is_complex) else dtype


def result_type(a, b) -> torch.dtype:
    """torch.result_type(a, b); two tensors of one dtype give that dtype without the call (the common
    case of every binary op, where the call costs a quarter of a microsecond)."""
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a.dtype is b.dtype:
        return a.dtype
    return torch.result_type(a, b)


def float_of(dtype: torch.dtype) -> torch.dtype:
    """The dtype of a float-valued op's result: integers and bool give the default float dtype."""
    return dtype if (dtype.is_floating_point or dtype.is_complex) else torch.get_default_dtype()


def cast(value: jax.Array, dtype: torch.dtype) -> jax.Array:
    """`value` converted to `dtype` as `copy_` converts it (complex -> bool tests both parts, as CPU's),
    with PyTorch's warning when a complex value loses its imaginary part."""
    jdt = dtypes.to_jax_dtype(dtype)
    if value.dtype == jdt:
        return value
    if jnp.issubdtype(value.dtype, jnp.complexfloating) and not dtype.is_complex and dtype != torch.bool:
        warnings.warn("Casting complex values to real discards the imaginary part", UserWarning, stacklevel=3)
    return _converter(value.dtype, jdt)(value)


# --- the jit policy --------------------------------------------------------------------------------
# Every program a kernel runs is made by `jitted`: a factory of bodies, cached by its static arguments
# (`maxsize` bounds a cache keyed by shapes; `donate` gives argument buffers to the program). A body
# with no static arguments is a factory of none (`_padded_positions()(x)`). Three kinds of program are
# made otherwise, each for a reason of its own:
# * a program that exists, re-jitted with its first argument donated (indexed_writes.into): keyed by
#   the program object, which is not a static argument;
# * a program keyed by a signature jitted's cache cannot express (inplace._program: 1, 1.0 and True are
#   one key there, and give different programs), and a one-off check program (chunked_draws._agrees);
# * below ops, modules that ops import (jaxdev/core, rng, distributed, custom_ops) and whole-graph
#   programs (jaxdev/compiler, jaxdev/fused) jit with jax.jit: they cannot import ops.toolkit without
#   importing upward, and their programs carry shardings or user bodies, not kernel bodies.


def jitted(factory: Callable | None = None, *, maxsize: int | None = None, donate: tuple | Callable = ()):
    """Decorator for `factory(*static) -> body` (or a tuple of bodies), `body(*arrays)` pure JAX.

    The decorated factory returns the body jitted, built once per static tuple (static values
    must be hashable). Eager JAX pays its dispatch cost per primitive; a jitted body pays it once
    per call, and under `torch.compile` it inlines into the program. The factory runs under
    `jax.ensure_compile_time_eval`, so a constant it builds is a concrete array even when the first
    call happens while a compiled program is being traced (a cached tracer would leak).

    `maxsize`: keep the last `maxsize` bodies only (a factory keyed by sizes or shapes, without
    bound); all by default. `donate`: the positions of the body's arguments whose buffers it may use
    for its results (XLA donation: the caller gives them up), or a function of the static arguments
    that says them. Used bare (`@jitted`) or with options (`@jitted(maxsize=64)`)."""
    if factory is None:
        return functools.partial(jitted, maxsize=maxsize, donate=donate)

    def build(*static):
        with jax.ensure_compile_time_eval():
            body = factory(*static)
        given = donate(*static) if callable(donate) else donate
        jit = functools.partial(jax.jit, donate_argnums=given) if given else jax.jit
        return tuple(jit(b) for b in body) if isinstance(body, tuple) else jit(body)

    cached = functools.cache(build) if maxsize is None else functools.lru_cache(maxsize=maxsize)(build)
    return functools.update_wrapper(cached, factory)


@jitted
def _converter(source, target):
    """dtypes.convert as one program (eagerly even float32 -> bfloat16 took 15-18 us: `.to(dtype)` is
    autocast's and mixed precision's most frequent op)."""
    return lambda x: dtypes.convert(x, target)


@jitted
def compiled(fn: Callable, *static):
    """`fn(*arrays, *static)` jitted once per static tuple; `fn` must be a module-level function."""
    return lambda *arrays: fn(*arrays, *static)


@jitted
def _zeros(shape, jdt):
    return lambda: jnp.zeros(shape, jdt)


def zeros(shape: tuple[int, ...], jdt) -> jax.Array:
    """Zeros of `shape`, as one cached jitted call (eager jnp.zeros dispatches several primitives)."""
    return _zeros(tuple(shape), jnp.dtype(jdt))()


def applied_body(fn, compute: torch.dtype, result: torch.dtype, nargs: int, exact_numbers: bool = False):
    """The jitted body `apply(fn, compute, result, tensors, extra, exact_numbers)` runs for `nargs`
    tensors, for a kernel that composes it into a program of its own (jaxdev/ops/foreach.py): the same
    object, so the same computation."""
    return _cast_body(fn, compute, result, nargs, exact_numbers)


@jitted
def _cast_body(fn, compute: torch.dtype, result: torch.dtype, nargs: int, exact_numbers: bool = False):
    """`fn` on `nargs` operands cast as TensorIterator casts them: each to the common dtype `compute`, then
    to its opmath dtype for the arithmetic. So a Python number or a float32 0-dim tensor beside half
    tensors is rounded to half first, as CPU's kernels read it (`x == 1.0001` is True for a half x of 1).
    `exact_numbers`: the op's CPU kernel reads a number second operand (a CPU scalar: a Python number or
    a 0-dim tensor) unrounded, in opmath (mul and the divisions of reduced-precision floats). A Python
    number reaches the jitted body as a 0-dim float64 (or int64) array, as a foreach program's numbers do."""
    common = dtypes.to_jax_dtype(compute)
    wide, result = opmath(common), dtypes.to_jax_dtype(result)

    def operand(a, second):
        a = jnp.asarray(a)
        if exact_numbers and second and a.ndim == 0 and a.dtype != common:
            return a.astype(wide)
        return narrowed(a, common).astype(wide)  # a float64 number to a half through float, as c10 does

    def run(*args):
        cast = [operand(a, i == 1) for i, a in enumerate(args[:nargs])]
        return fn(*cast, *args[nargs:]).astype(result)

    return run


def same_dtype_bodies(fn, nargs: int, when: Callable[[torch.dtype], bool]):
    """typed_bodies for `apply(fn, dtype, dtype, tensors)`, where `when(dtype)`."""
    return typed_bodies(fn, nargs, lambda dtype: (dtype, dtype) if when(dtype) else None)


def typed_bodies(fn, nargs: int, dtypes_of: Callable[[torch.dtype], tuple | None]):
    """For `register_functional(fast=...)`: dtype -> (what `apply(fn, compute, result, tensors)` runs on
    `nargs` plain tensors of that dtype, result), where `dtypes_of(dtype)` is (compute, result) as the
    Python kernel computes them, or None where that kernel does something else."""

    def bodies(dtype):
        chosen = dtypes_of(dtype)
        return None if chosen is None else (_cast_body(fn, chosen[0], chosen[1], nargs, False), chosen[1])

    return bodies


_PLAIN: dict = {}


def plain(fn):
    """`fn` as a plain function: jnp ufunc objects hash slowly, and `fn` keys the jit cache."""
    if type(fn).__name__ != "ufunc":
        return fn
    if fn not in _PLAIN:
        _PLAIN[fn] = lambda *args: fn(*args)
    return _PLAIN[fn]


def apply(fn, compute: torch.dtype, result: torch.dtype, tensors, extra=(), exact_numbers=False):
    """`fn` jitted on the tensors' values cast to `compute`, then to its opmath dtype, cast to `result`
    (_cast_body). `fn` must be a module-level function (or a `plain` ufunc): it keys the cache."""
    return on_views(_cast_body(fn, compute, result, len(tensors), exact_numbers), tensors, extra)


def on_views(body, args, extra=()):
    """`body(*values, *extra)` for the jitted `body`: `args` are tensors (or Python numbers, passed as
    they are). Strided views among them (x.t(), x[:, ::2], an expand) are read inside the same XLA
    program, where their transpose or slice fuses into the body, rather than materialised first."""
    if _plain_values is not None:
        values = _plain_values(args)
        if values is not None:  # the hot path: every tensor is its whole storage (natively checked)
            return body(*values, *extra)
    values, recipes, fused = [], [], False
    for t in args:
        if isinstance(t, Tensor) and not t.is_cpu:
            array, offset, recipe = tensor.read_parts(t)
            values.append(array)
            if recipe is not None:
                values.append(offset)
                fused = True
            recipes.append(recipe)
        else:
            values.append(J(t) if isinstance(t, Tensor) else t)
            recipes.append(None)
    if not fused:  # every argument is its whole storage
        return body(*values, *extra)
    return _reading_views(body, tuple(recipes))(*values, *extra)


# The hot path of on_views in one native call (jaxdev/native.py), when the module is in use.
_plain_values = native.module.plain_values if native.module is not None else None


@jitted(maxsize=4096)
def _reading_views(body, recipes):
    def run(*args):
        values, i = [], 0
        for recipe in recipes:
            if recipe is None:
                values.append(args[i])
                i += 1
            else:
                values.append(tensor.view_value(recipe, args[i], args[i + 1]))
                i += 2
        return body(*values, *args[i:])

    return run


def each_location_once(t):
    """t's broadcast (stride-0) dimensions narrowed to one element: the same memory locations, each once.
    CPU's fill_ with a number, zero_ and threshold_ skip TensorIterator's internal-overlap check (every
    element aliasing one location gets the same value), so an expanded tensor can be written by them;
    writing through this view does the same. A negative or conjugate view is written by PyTorch's
    fallback through copy_, which checks: left as is, it raises."""
    if t.is_neg() or t.is_conj():
        return t
    for d, (n, s) in enumerate(zip(t.shape, t.stride())):
        if s == 0 and n > 1:
            t = t.narrow(d, 0, 1)
    return t


# --- products at the device's precision -------------------------------------------------------------

_FLOAT32_PRECISION = {
    "highest": jax.lax.Precision.HIGHEST,  # full float32: PyTorch's default, bit-faithful on CPU
    "high": jax.lax.Precision.HIGH,  # TF32-class passes where the device has them
    "medium": jax.lax.Precision.DEFAULT,  # bfloat16-class passes
}


def product_precision(jdt) -> tuple:
    """(precision, accumulation dtype) for a matrix product or convolution over `jdt` inputs.

    Half inputs multiply as they are and accumulate in float32 (CUDA's contract, and CPU's: tensor
    cores on a GPU, a float32 accumulator in CPU's BLAS), rounded once by the caller: bfloat16 at the
    default precision, which a TPU computes in one exact bfloat16 pass, float16 at the highest, as
    a TPU's one pass would round float16's 11-bit significands to bfloat16's 8 (its float32 passes
    are exact for them; XLA's CPU backend ignores the setting). float32 follows
    `torch.set_float32_matmul_precision`, read at each call. Everything else (float64, complex,
    integers) is exact."""
    jdt = jnp.dtype(jdt)
    if jdt == jnp.bfloat16:
        return jax.lax.Precision.DEFAULT, jnp.dtype(jnp.float32)
    if jdt == jnp.float16:
        return jax.lax.Precision.HIGHEST, jnp.dtype(jnp.float32)
    if jdt == jnp.float32:
        return _FLOAT32_PRECISION[torch.get_float32_matmul_precision()], None
    return jax.lax.Precision.HIGHEST, None


def widened_product_precision(jdt) -> tuple:
    """product_precision for a kernel that widens half inputs to float32 before its products, as
    CPU's math paths do (attention, the transformer's fused ops): float32 products, at float32's
    setting. (At the half dtype's own setting a TPU multiplies the widened float32 operands in one
    bfloat16 pass, rounding every intermediate it multiplies to bfloat16: a bfloat16 attention's
    gradient was 118x the OpInfo tolerance from float64 there, CPU's 0.24x.)"""
    return product_precision(jnp.promote_types(jdt, jnp.float32))


def matmul(a, b, precision, accumulate):
    """jnp.matmul at the device's product precision (product_precision). On XLA's CPU backend a
    half x half -> float32 dot has no kernel for every operand layout (a transposed view read inside
    the product's program: "Unsupported element type for DotThunk::Execute: BF16 x BF16 = F32"), so
    there half operands are widened first: their products are exact in float32, the result the same."""
    if accumulate is not None and a.dtype != accumulate and jax.default_backend() == "cpu":
        a, b = a.astype(accumulate), b.astype(accumulate)
    return jnp.matmul(a, b, precision=precision, preferred_element_type=accumulate)


# --- ordering as PyTorch does it --------------------------------------------------------------------


def sort_key(x):
    """PyTorch's order as a sort key: -0.0 and 0.0 tie (lax.sort orders them), bools sort as
    integers; NaN sorts last, as lax.sort puts it."""
    if x.dtype == jnp.bool_:
        return x.astype(jnp.uint8)
    if jnp.issubdtype(x.dtype, jnp.floating):
        return x + jnp.zeros((), x.dtype)
    return x


def _argsort_last(x, descending):
    return jnp.argsort(sort_key(x), axis=-1, stable=True, descending=descending)


@jitted
def stable_sort(axis, descending):
    def run(x):
        x = jnp.moveaxis(x, axis, -1)
        idx = _argsort_last(x, descending)
        vals = jnp.take_along_axis(x, idx, axis=-1)
        return jnp.moveaxis(vals, -1, axis), jnp.moveaxis(idx, -1, axis).astype(jnp.int64)

    return run


# --- indexing as PyTorch does it -------------------------------------------------------------------


def add_at(ref, values):
    """`ref.add(values)` for an `x.at[...]` reference; for bool, PyTorch's sum is a logical or."""
    return ref.max(values) if values.dtype == jnp.bool_ else ref.add(values)


def multiply_at(ref, values):
    """`ref.multiply(values)`; for bool, PyTorch's product is a logical and."""
    return ref.min(values) if values.dtype == jnp.bool_ else ref.multiply(values)


def check_index_bounds(idx, size: int, dim: int, error_of=None) -> None:
    """PyTorch's IndexError for an index outside [-size, size) (deferred inside compiled programs);
    `error_of(message)` makes an op's own error from the usual message."""
    if idx.size == 0:
        return

    def error():
        lo, hi = int(jnp.min(idx)), int(jnp.max(idx))
        bad = lo if lo < -size else hi
        message = f"index {bad} is out of bounds for dimension {dim} with size {size}"
        return IndexError(message) if error_of is None else error_of(message)

    tracing.check_values(outside(-int(size), int(size))(idx), error)


@jitted
def outside(low: int, high: int):
    """The flag "an index lies outside [low, high)" as one program (eagerly: two comparisons, an or and
    an any, ~30 us)."""
    return lambda idx: jnp.any((idx < low) | (idx >= high))
