"""The one place where jax kernels are registered with PyTorch's dispatcher.

Rule tables, each keyed by qualified overload name ("aten::add.Tensor"), as JAX's lax keeps one
table per concern:
  KERNELS     the Python kernel registered at PrivateUse1
  FUNCTIONAL  a functional overload -> its body `fn(*args) -> jax.Array(s)` (what `register_functional`
              decorates): the source every derived kernel below is made from
  DERIVED     in-place / out= overloads derived from a functional kernel (ops/kit/derived.py) -> that
              functional overload
  BACKWARD    `*_backward` overloads derived as the VJP of a functional kernel -> that forward overload
and FAST_BODIES, keyed by the OpOverload: an elementwise op's per-dtype jitted bodies (`fast=`).

Registration refuses a CompositeImplicitAutograd op: a PrivateUse1 kernel takes the op's
decomposition away from AutogradPrivateUse1, and its gradients are then silently lost (the origin
bug of this project). Such ops decompose into ops that have kernels here.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import torch
from torch._ops import OpOverload

from jaxdev import dtypes, eager_modes, layout, native, tensor, tracing
from jaxdev.ops.kit import J, capabilities, foreach_replay, jitted, memo
from jaxdev.ops.kit.derived import (  # noqa: F401  (check_cast, store_into, broadcast_shapes: imported from here)
    as_shape_error,
    broadcast_shapes,
    check_cast,
    inplace_kernel,
    inplace_variant,
    out_args,
    out_kernel,
    out_variant,
    shape_errors_as_torch,
    store_into,
)
from jaxdev.ops.kit.native_kernels import fast_kernel

aten = torch.ops.aten

KERNELS: dict[str, Callable] = {}
# op -> its `fast` bodies (see register_functional): dtype -> (the jitted body its kernel applies to plain
# tensors of that dtype, the result dtype), or None. Kernels that compose per-tensor ops into one program
# of their own (jaxdev/ops/foreach.py) run these very bodies.
FAST_BODIES: dict[OpOverload, Callable] = {}
FUNCTIONAL: dict[str, Callable] = {}
DERIVED: dict[str, str] = {}
# op -> its number arguments (a Scalar, a Scalar[]; a position, or a keyword's name) that its kernel
# reads as data of its program, traced numbers included: fused eager (jaxdev/fused) passes floats there
# as program inputs, so a step size that changes every step does not make a new program every step.
DYNAMIC_NUMBERS: dict[OpOverload, tuple[int | str, ...]] = {}
BACKWARD: dict[str, str] = {}


def numbers_as_data(where: tuple[int | str, ...], *ops: OpOverload) -> None:
    """DYNAMIC_NUMBERS for `ops` and their in-place overloads (the same kernel writing into self): a
    single-tensor step (`param.addcdiv_(exp_avg, denom, value=-step_size)`) lifts its step size as the
    foreach one does. The kernel must read these arguments traced, as weakly typed float64 scalars."""
    for op in ops:
        for o in (op, inplace_variant(op)):
            if o is not None:
                DYNAMIC_NUMBERS[o] = where


# The dtype carriers (jaxdev/ops/carriers puts them here, before any kernel registers): `carry(op, fn)`
# serves around a kernel a dtype JAX has no type of; every kernel passes through each in order.
CARRIERS: list[Callable[[OpOverload, Callable], Callable]] = []

_LIB = torch.library.Library("aten", "IMPL")


class RegistrationError(RuntimeError):
    pass


def is_composite_implicit(op: OpOverload) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")


def register(*ops: OpOverload):
    """Decorator: `fn` becomes the PrivateUse1 kernel of each op (it receives torch tensors)."""

    def deco(fn):
        for op in ops:
            _register(op, fn)
        return fn

    return deco


# The one exception to that refusal: CompositeImplicitAutograd ops whose C++ kernel reads raw memory
# (data_ptr, accessors) as if every tensor were on CPU. A jax tensor's data pointer is fake, so the
# composite kills the process (SIGSEGV/SIGBUS); none has a derivative to lose (their outputs never carry
# a grad_fn on CPU). jaxdev/ops/raw_memory.py gives each a kernel (run on CPU copies, or refuse).
RAW_MEMORY_COMPOSITES = frozenset(
    {
        "aten::_rowwise_prune",
        "aten::_saturate_weight_to_fp16",
        "aten::_sobol_engine_draw",
        "aten::_sobol_engine_ff_",
        "aten::_sobol_engine_initialize_state_",
        "aten::_sobol_engine_scramble_",
        "aten::choose_qparams_optimized",
        "aten::fbgemm_linear_fp16_weight",
        "aten::fbgemm_linear_fp16_weight.out",
        "aten::fbgemm_linear_fp16_weight_fp32_activation",
        "aten::fbgemm_linear_fp16_weight_fp32_activation.out",
        "aten::fbgemm_linear_int8_weight",
        "aten::fbgemm_linear_int8_weight_fp32_activation",
        "aten::fbgemm_linear_quantize_weight",
        "aten::fbgemm_pack_gemm_matrix_fp16",
        "aten::fbgemm_pack_quantized_matrix",
        "aten::fbgemm_pack_quantized_matrix.KN",
    }
)


# CompositeImplicitAutograd ops that also have CPU kernels and a derivative formula of their own (an
# Autograd kernel): a PrivateUse1 kernel loses nothing (AutogradPrivateUse1 then runs the formula) and
# computes as CPU's kernel does, where the decomposition rounds half precision op by op.
FORMULA_COMPOSITES = frozenset({"aten::silu_backward"})


def register_on_cpu_kernel(*ops: OpOverload):
    """Decorator for `fn`, a kernel that only hands the op to CPU's kernel (view ops, whose CPU kernels
    write metadata alone). With the native module (jaxdev/native.py) the dispatcher gets the same
    redispatch in C++, and a view costs what it costs on CPU (0.7 us, against 3.2 us through Python);
    KERNELS keeps `fn` either way."""

    def deco(fn):
        for op in ops:
            _register(op, fn, on_cpu=native.module is not None)
        return fn

    return deco


def register_clone(op: OpOverload, fn: Callable, reader: Callable) -> None:
    """aten::clone: `fn` as the slow path of a native kernel (jaxdev/csrc/native.cpp,
    register_clone_kernel) that makes a contiguous clone without a Python frame: the same array for a
    tensor that is its whole storage, `program(stored, offset)` for a view, where `reader(view)` gives
    (program, offset) (tensor.view_reader)."""
    _register(
        op, fn, native_kernel=lambda slow: native.module.register_clone_kernel(slow, reader, tensor.SHARDED_ENTRIES)
    )


def named(fn: Callable, op: OpOverload) -> Callable:
    """`fn`, named after `op` if a factory made it: a closure (`_unary.<locals>.kernel`) takes the name of
    the first op it is registered for, so that `jaxdev explain --dev` and the registry's errors say which
    op it is; a module-level function keeps its own name. Every registration goes through here."""
    if "<locals>" in getattr(fn, "__qualname__", ""):
        fn.__qualname__ = op.name()
    return fn


def register_layout_kernel(op: OpOverload, fn: Callable, key: str) -> None:
    """`fn` becomes `op`'s kernel for jax tensors of a sparse layout (`key`: SparsePrivateUse1 or
    SparseCsrPrivateUse1, jaxdev/ops/sparse/). These are not PrivateUse1 kernels: KERNELS does not hold
    them."""
    _LIB.impl(op, named(fn, op), key)


def _register(
    op: OpOverload,
    fn: Callable,
    on_cpu: bool = False,
    fast: Callable | None = None,
    native_kernel: Callable[[str], None] | None = None,
) -> None:
    """`fn` becomes `op`'s PrivateUse1 kernel: itself, or the slow path of a native kernel (`fast`
    bodies for an elementwise op, or `native_kernel` installing another) when the module is in use."""
    name = op.name()
    named(fn, op)
    formula = name in FORMULA_COMPOSITES and torch._C._dispatch_has_kernel_for_dispatch_key(name, "Autograd")
    if is_composite_implicit(op) and name not in RAW_MEMORY_COMPOSITES and not formula:
        raise RegistrationError(
            f"refusing to register {name} at PrivateUse1: it is CompositeImplicitAutograd, and a "
            "backend kernel would replace its decomposition under AutogradPrivateUse1 so its "
            "gradients would be silently lost; let it decompose"
        )
    if name in KERNELS:
        raise RegistrationError(f"{name} already has a jax kernel ({KERNELS[name].__qualname__})")
    if name in RELAID:
        fn = _relaid_kernel(op, fn)
    for carry in CARRIERS:  # raw bytes, then complex32 around them (jaxdev/ops/carriers)
        fn = carry(op, fn)
    if fast is not None:
        FAST_BODIES[op] = fast
    # a family this platform's XLA lacks for some dtypes goes to CPU for them (ops/kit/capabilities.py)
    installed = fn if on_cpu else capabilities.served(op, in_mode(op, fn))
    if on_cpu:
        native.module.register_cpu_kernels([name.removeprefix("aten::")])
    elif fast is None and native_kernel is None and foreach_replay.wanted(op):
        foreach_replay.install(op, installed)
    elif native.module is not None and (fast is not None or native_kernel is not None or memo.wanted(op)):
        memo.install(op, installed, native_kernel or (fast_kernel(op, fast) if fast is not None else None))
    else:
        _LIB.impl(op, installed, "PrivateUse1")
    KERNELS[name] = fn


def in_mode(op: OpOverload, fn: Callable) -> Callable:
    """`fn` as the dispatcher calls it: itself in the default eager mode; recorded (fused) or waited
    for (sync) in the other modes (jaxdev/eager_modes.py). One attribute test per op otherwise."""
    active = eager_modes.ACTIVE
    dispatch = eager_modes.dispatch

    def kernel(*args, **kwargs):
        try:
            if active.on:
                return dispatch(op, fn, args, kwargs)
            return fn(*args, **kwargs)
        except dtypes.ComplexHalfError as e:  # a complex32 argument read by an op CPU refuses it too
            raise e.naming(op) from None

    kernel.__qualname__ = fn.__qualname__
    kernel.__name__ = getattr(fn, "__name__", "kernel")
    kernel.__wrapped__ = fn
    return kernel


# `register`ed kernels whose new results are re-laid out as PyTorch lays them out (`register_functional`
# kernels all are): their results come from jax arrays made contiguous.
RELAID = {"aten::_native_batch_norm_legit", "aten::_native_batch_norm_legit.no_stats"}


def _relaid_kernel(op: OpOverload, fn: Callable) -> Callable:
    def kernel(*args, **kwargs):
        return relaid(op, args, kwargs, fn(*args, **kwargs))

    kernel.__qualname__ = fn.__qualname__
    return kernel


def register_functional(
    *ops: OpOverload, inplace: bool = True, out: bool = True, fast: dict | None = None, indexed: bool = False
):
    """Decorator for `fn(*args, **kwargs) -> jax.Array | tuple[jax.Array, ...]`.

    Registers the functional overloads, and derives their in-place (`op_`) and out= overloads:
    those compute the same values, check that the result can be cast to the destination's dtype
    and write it through the destination's strides, so aliases see it.

    `fast`: {op: bodies} for elementwise overloads whose common case runs natively (kit.native_kernels.fast_kernel):
    `bodies(dtype)` is the jitted body `fn` itself would run on plain tensors of that dtype with every
    other argument at its default (None where the result has another dtype or `fn` would raise).

    `indexed`: an indexed write (scatter, index_copy...) whose `fn` ends in `indexed_writes.into`: the
    in-place kernel gives `self`'s buffer to that program where nothing else can see it.
    """

    def deco(fn):
        named(fn, ops[0])  # before the derived kernels take their names from it
        body = shape_errors_as_torch(fn)
        for op in ops:
            _register(op, _functional_kernel(fn, op), fast=(fast or {}).get(op))
            FUNCTIONAL[op.name()] = fn
            ip = inplace_variant(op) if inplace else None
            if ip is not None:
                _register(ip, inplace_kernel(body, op, ip, indexed))
                DERIVED[ip.name()] = op.name()
            ov = out_variant(op) if out else None
            if ov is not None:
                _register(ov, out_kernel(body, out_args(ov), op, ov))
                DERIVED[ov.name()] = op.name()
        return fn

    return deco


def _wrap_result(r):
    if isinstance(r, tuple):
        return tuple(None if a is None else tensor.wrap(a) for a in r)
    return tensor.wrap(r)


def _wrap_laid_out(r, op: OpOverload, args, kwargs, asked: bool = False):
    """The results as new jax tensors with the strides PyTorch gives them (see jaxdev/layout.py).
    `asked`: the caller found an argument that is not plain (or the op lays out its results itself), so
    the cached answer is read without testing the arguments again."""
    first = r[0] if isinstance(r, tuple) else r
    traced = tracing.compiled_layout(first)
    if asked:
        layouts = layout.cached_layouts(op, args, kwargs, traced)
    else:
        layouts = layout.result_layouts(op, args, kwargs, traced)
    if layouts is None:
        return _wrap_result(r)
    rs = r if isinstance(r, tuple) else (r,)
    out = []
    for i, a in enumerate(rs):
        laid = layouts[i] if i < len(layouts) else None
        if a is None:
            out.append(None)
            continue
        shape = tuple(a.shape)
        if laid is not None and laid[0] == shape:
            # most answers are contiguous (a product of a transposed weight): wrapped as wrap_strided would
            contiguous = laid[1] == tensor.contiguous_strides(shape)
            out.append(tensor.wrap(a) if contiguous else tensor.wrap_strided(a, laid[1]))
            continue
        # a cached answer for other shapes: ask again
        fresh = layout.computed_layouts(op, args, kwargs, tracing.compiled_layout(a)) if laid is not None else None
        laid = fresh[i] if fresh and i < len(fresh) else None
        ok = laid is not None and laid[0] == shape
        out.append(tensor.wrap_strided(a, laid[1]) if ok else tensor.wrap(a))
    return tuple(out) if isinstance(r, tuple) else out[0]


def relaid(op: OpOverload, args, kwargs, results):
    """New contiguous result tensors of a `register`ed kernel re-laid out as PyTorch lays them out."""
    if layout.all_contiguous(args, kwargs):
        return results
    rs = results if isinstance(results, tuple) else (results,)
    first = next((t for t in rs if isinstance(t, torch.Tensor)), None)
    if first is None:
        return results
    layouts = layout.result_layouts(op, args, kwargs, tracing.compiled_layout(tensor.box_of(first).pending()))
    if layouts is None:
        return results
    out = []
    for i, t in enumerate(rs):
        laid = layouts[i] if i < len(layouts) else None
        fresh = isinstance(t, torch.Tensor) and t.numel() > 1 and t.is_contiguous()
        if fresh and laid is not None and laid[0] == tuple(t.shape) and laid[1] != t.stride():
            t = tensor.wrap_strided(tensor.read(t), laid[1])
        out.append(t)
    return tuple(out) if isinstance(results, tuple) else out[0]


def _functional_kernel(fn, op):
    # The hot path of every eager op: one Python frame around the body, no context manager, the
    # layout question asked only when an argument is not contiguous (or the op lays out its results
    # itself), JAX's shape and out-of-memory errors translated only when they happen.
    own_layout = layout.lays_out_itself(op)
    contiguous = layout.all_contiguous
    wrap = tensor.wrap

    def kernel(*args, **kwargs):
        try:
            r = fn(*args, **kwargs)
            if not own_layout and contiguous(args, kwargs):
                return _wrap_result(r) if type(r) is tuple else wrap(r)
            return _wrap_laid_out(r, op, args, kwargs, asked=True)
        except jax.errors.JaxRuntimeError as error:
            tensor.raise_if_out_of_memory(error)
            raise
        except (TypeError, ValueError) as e:
            error = as_shape_error(e, args, kwargs)
            if error is None:
                raise
            raise error from None

    kernel.__qualname__ = fn.__qualname__
    return kernel


# --- backward kernels derived as the VJP of a functional kernel ---------------------------------


def register_backward(backward: OpOverload, forward: OpOverload, *, prepare: Callable | None = None) -> None:
    """`backward`'s kernel is the VJP of `forward`'s functional kernel, which must trace cleanly.

    The backward's arguments are matched to the forward's by name; its first argument is the
    cotangent (grad_output) and `output_mask`, where it has one, drops the gradients it does not
    want. It returns the gradients of the forward's first tensor arguments, as many as its schema
    returns. `prepare(args, grad_output) -> args` supplies the forward arguments the backward does
    not carry (a linear op's backward gets `input_size` where the forward gets `self`: zeros of
    that size do, since the VJP of a linear map does not depend on the point).

    The forward kernel runs on jax tensors over JAX tracers inside `jax.vjp`, jitted once per
    static signature: one definition of the op gives both directions, and they cannot disagree.
    """
    name = forward.name()
    if name not in FUNCTIONAL:
        raise RegistrationError(f"{backward.name()}: derive it from a functional kernel; {name} has none")
    _register(backward, _backward_kernel(backward, forward, prepare))
    BACKWARD[backward.name()] = name


def _hashable(v):
    return tuple(_hashable(x) for x in v) if isinstance(v, (list, tuple)) else v


_MISSING = object()


def _backward_kernel(backward: OpOverload, forward: OpOverload, prepare):
    names = tuple(a.name for a in backward._schema.arguments)
    wanted = len(backward._schema.returns)
    spec = tuple((a.name, a.default_value if a.has_default_value() else _MISSING) for a in forward._schema.arguments)
    name = forward.name()

    def kernel(*args, **kwargs):
        bound = dict(zip(names, args))
        if kwargs:
            bound.update(kwargs)
        cotangent = bound.pop(names[0])
        mask = bound.pop("output_mask", None)
        if prepare is not None:
            bound = prepare(bound, cotangent)
        where, arrays, static = [], [], []
        for i, (arg, default) in enumerate(spec):
            v = bound.get(arg, default)
            if isinstance(v, (torch.Tensor, jax.Array)):
                where.append(i)
                arrays.append(J(v) if isinstance(v, torch.Tensor) else v)
                static.append(None)
            elif v is _MISSING:
                raise RegistrationError(f"{backward.name()} gives no value for {name}'s argument {arg!r}")
            else:
                static.append(_hashable(v))
        grads = _vjp(name, tuple(static), tuple(where), wanted)(J(cotangent), *arrays)
        if mask is not None:
            grads = tuple(g if m else None for g, m in zip(grads, mask))
        return _wrap_laid_out(tuple(grads) if wanted > 1 else grads[0], backward, args, kwargs)

    kernel.__qualname__ = f"vjp[{name}]"
    return kernel


def _vjp_body(name: str, static: tuple, where: tuple, wanted: int):
    fn = FUNCTIONAL[name]

    def body(cotangent, *arrays):
        def forward(*differentiated):
            values = list(static)
            for k, (i, a) in enumerate(zip(where, arrays)):
                values[i] = tensor.wrap(differentiated[k] if k < wanted else a)
            return fn(*values)

        with tensor.scratch():
            out, pullback = jax.vjp(forward, *arrays[:wanted])
        if isinstance(out, tuple):  # only the first output carries the cotangent
            cotangents = (cotangent.astype(out[0].dtype),) + tuple(jax.numpy.zeros_like(o) for o in out[1:])
        else:
            cotangents = cotangent.astype(out.dtype)
        return pullback(cotangents)

    return body


_vjp = jitted(_vjp_body)
