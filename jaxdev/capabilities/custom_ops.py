"""PyTorch operators written in JAX: `jaxdev.jax_op`.

    @jaxdev.jax_op("mylib::gelu_tanh")
    def gelu_tanh(x: jax.Array, scale: float = 1.0) -> jax.Array:
        return jax.nn.gelu(x * scale, approximate=True)

    y = gelu_tanh(torch.randn(8, device="jax"))        # a torch op: eager, fused, compiled, autograd

The decorator defines the operator with `torch.library.custom_op` (so PyTorch's own tools know it:
`torch.library.register_autograd`, `opcheck`, dynamo) and registers, from the one JAX function:
* its jax (PrivateUse1) kernel: tensor arguments become their `jax.Array`s (sharded ones included, so
  on a mesh the function runs over the sharded arrays and XLA partitions it) and the function runs
  jitted, once per set of non-tensor arguments (they are static, as `jax.jit`'s static arguments). It
  goes through the eager modes as every jaxdev kernel does (`registry.in_mode`), so fused eager records
  it and compiled programs trace it;
* its CPU kernel: the same function through JAX's CPU backend (values copied in and out);
* its fake (meta) function: `jax.eval_shape` of the function, dtypes mapped with jaxdev.dtypes;
* its backward: `jax.vjp` of the function, itself an operator (`jaxdev_vjp::<ns>__<name>`, with the
  same three kernels) so that backward graphs compile and fused eager records it too. It recomputes
  the forward inside the VJP (XLA keeps only what the pullback needs). `torch.library.register_autograd`
  on the op replaces it (a Pallas kernel, which JAX cannot differentiate, needs that).

The schema comes from the function's signature (tensors: `jax.Array`/`torch.Tensor` or unannotated
without a default; scalars: int, float, bool, str, their lists and optionals) or from `schema=`.
Operators are functional: no argument is written, every result is a new tensor.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
import torch

from jaxdev import dtypes, tensor
from jaxdev.ops import registry
from jaxdev.ops.kit import J

_MISSING = object()
_SCALARS = {int: "int", float: "float", bool: "bool", str: "str"}
_TENSOR_NAMES = {"Array", "ndarray", "Tensor", "ArrayLike"}
# Ops made here, by name: keeps the definitions (and their vjp ops) alive and lets tests find them.
OPS: dict[str, torch._library.custom_ops.CustomOpDef] = {}


def jax_op(name: str, fn: Callable | None = None, *, schema: str | None = None, tags: Sequence = ()):
    """Decorator: the JAX function `fn` becomes the PyTorch operator `name` ("namespace::op").

    Returns the operator (a `torch.library.CustomOpDef`: call it with torch tensors). `schema`, e.g.
    "(Tensor x, float alpha=1.0) -> Tensor", replaces the one inferred from `fn`'s signature; `fn` is
    called with the schema's positional arguments in order and its keyword-only ones by name."""

    def deco(f: Callable):
        return _make(name, f, schema, tuple(tags))

    return deco if fn is None else deco(fn)


def _make(name: str, fn: Callable, schema: str | None, tags: tuple):
    namespace, _, short = name.partition("::")
    if not (namespace.isidentifier() and short.isidentifier()):
        raise ValueError(f"jax_op names are 'namespace::name' with identifiers on both sides, not {name!r}")
    text = schema if schema is not None else infer_schema(fn, name)
    parsed = _checked(name, text)
    call = _Call(name, fn, parsed)
    opdef = _define(name, text, call, tags)
    vjp_name, vjp_schema = _vjp_schema(namespace, short, parsed)
    vjp_call = _Call(vjp_name, _vjp_function(call), _checked(vjp_name, vjp_schema))
    vjp_op = _define(vjp_name, vjp_schema, vjp_call, ())._opoverload
    setup, backward = _autograd(call, vjp_op)
    opdef.register_autograd(backward, setup_context=setup)
    opdef.jax_function = fn
    OPS[name] = opdef
    return opdef


def _define(name: str, schema: str, call: _Call, tags: tuple):
    opdef = torch.library.custom_op(name, call.on_cpu, mutates_args=(), schema=schema, tags=tags)
    opdef.register_fake(call.fake)
    op = opdef._opoverload
    # The op's own library (custom_op replaces it whole when the name is defined again), and the
    # registry's eager-mode wrapper, as every jaxdev kernel has: fused eager records the op.
    opdef._lib.impl(op, registry.in_mode(op, call.on_jax), "PrivateUse1")
    return opdef


# --- schemas ------------------------------------------------------------------------------------


def infer_schema(fn: Callable, name: str = "jax_op") -> str:
    """The schema text of `fn`'s signature, e.g. "(Tensor x, float scale=1.0) -> Tensor"."""
    signature = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # annotations naming what the function's module cannot resolve: read them as text
        hints = {}
    parts, keyword = [], False
    for p in signature.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"{name}: *args and **kwargs cannot be an operator's arguments; name each one")
        if p.kind == p.KEYWORD_ONLY and not keyword:
            parts.append("*")
            keyword = True
        annotation = hints.get(p.name, p.annotation)
        kind = _argument_type(annotation, p.default)
        if kind is None:
            raise TypeError(
                f"{name}: argument {p.name!r} ({_show(annotation, p.default)}) is not a tensor, int, float, bool, "
                "str, a list or an optional of those; give schema= or change the signature"
            )
        parts.append(f"{kind} {p.name}" + ("" if p.default is p.empty else "=" + _default_text(p.default, name)))
    returns = _return_type(hints.get("return", signature.return_annotation), name)
    return f"({', '.join(parts)}) -> {returns}"


def _is_tensor_annotation(a) -> bool:
    if isinstance(a, str):
        return a.rsplit(".", 1)[-1] in _TENSOR_NAMES
    return a is torch.Tensor or a is jax.Array or (isinstance(a, type) and issubclass(a, (jax.Array, torch.Tensor)))


def _argument_type(a, default) -> str | None:
    if a is inspect.Parameter.empty:  # unannotated: a tensor, or the type of its default
        if default is inspect.Parameter.empty:
            return "Tensor"
        a = type(default) if type(default) in _SCALARS else None
        return None if a is None else _SCALARS[a]
    if _is_tensor_annotation(a):
        return "Tensor"
    if isinstance(a, str):
        return {"int": "int", "float": "float", "bool": "bool", "str": "str"}.get(a)
    if a in _SCALARS:
        return _SCALARS[a]
    origin, args = typing.get_origin(a), typing.get_args(a)
    if origin in (typing.Union, types.UnionType) and type(None) in args and len(args) == 2:
        inner = _argument_type(next(x for x in args if x is not type(None)), inspect.Parameter.empty)
        return None if inner is None or inner.endswith("?") else inner + "?"
    if origin in (list, tuple, Sequence) and args:
        element = {x for x in args if x is not Ellipsis}
        if len(element) == 1 and next(iter(element)) in (int, float, bool):
            return _SCALARS[next(iter(element))] + "[]"
    return None


def _return_type(a, name: str) -> str:
    if a is inspect.Signature.empty or _is_tensor_annotation(a):
        return "Tensor"
    args = typing.get_args(a)
    if typing.get_origin(a) is tuple and args and Ellipsis not in args and all(map(_is_tensor_annotation, args)):
        return "(" + ", ".join("Tensor" for _ in args) + ")"
    raise TypeError(
        f"{name}: the return annotation {_show(a, inspect.Parameter.empty)} is not an array or a tuple of a "
        "fixed number of arrays; annotate -> jax.Array or -> tuple[jax.Array, jax.Array], or give schema="
    )


def _show(annotation, default) -> str:
    if annotation is not inspect.Parameter.empty:
        return getattr(annotation, "__name__", None) or str(annotation)
    return f"unannotated, default {default!r}"


def _default_text(v, name: str) -> str:
    if v is None or isinstance(v, (bool, int)):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str) and '"' not in v and "\\" not in v:
        return f'"{v}"'
    if isinstance(v, (list, tuple)) and all(isinstance(x, (bool, int, float)) for x in v):
        return "[" + ", ".join(_default_text(x, name) for x in v) + "]"
    raise TypeError(f"{name}: the default value {v!r} cannot be written in an operator schema")


def _type_text(t) -> str | None:
    """Schema text of a supported argument type, None for anything else."""
    if isinstance(t, torch._C.OptionalType):
        inner = _type_text(t.getElementType())
        return None if inner is None or inner.endswith("?") else inner + "?"
    if isinstance(t, torch._C.ListType):
        inner = _type_text(t.getElementType())
        return inner + "[]" if inner in ("int", "float", "bool") else None
    return {"Tensor": "Tensor", "int": "int", "float": "float", "bool": "bool", "str": "str"}.get(str(t))


def _checked(name: str, text: str) -> torch._C.FunctionSchema:
    try:
        schema = torch._C.parse_schema(name + text)
    except RuntimeError as e:
        raise ValueError(f"{name}: the schema {text!r} does not parse: {str(e).splitlines()[0]}") from None
    for a in schema.arguments:
        if a.alias_info is not None:
            raise ValueError(f"{name}: jax_op operators are functional, but the schema writes {a.name!r}")
        kind = _type_text(a.type)
        if kind is None:
            raise ValueError(f"{name}: argument {a.name!r} of type {a.type} is not supported (tensors, scalars only)")
        if a.kwarg_only and kind.startswith("Tensor"):
            raise ValueError(f"{name}: tensor argument {a.name!r} is keyword-only; make it positional")
    if not any(_type_text(a.type).startswith("Tensor") for a in schema.arguments):
        raise ValueError(f"{name}: an operator needs a tensor argument (its results go on that tensor's device)")
    if not schema.returns or any(str(r.type) != "Tensor" or r.alias_info is not None for r in schema.returns):
        raise ValueError(f"{name}: an operator returns one or more new tensors, not {text.split('->')[-1].strip()}")
    return schema


# --- kernels ------------------------------------------------------------------------------------


class _Call:
    """One operator's JAX function and how the dispatcher's arguments reach it."""

    def __init__(self, name: str, fn: Callable, schema: torch._C.FunctionSchema):
        self.name, self.fn = name, fn
        arguments = schema.arguments
        self.names = tuple(a.name for a in arguments)
        self.keyword = tuple(a.kwarg_only for a in arguments)
        self.defaults = tuple(a.default_value if a.has_default_value() else _MISSING for a in arguments)
        self.tensor = tuple(_type_text(a.type).startswith("Tensor") for a in arguments)
        self.results = len(schema.returns)
        self._programs: dict = {}

    def bind(self, args, kwargs) -> list:
        """The arguments in schema order, defaults filled (the dispatcher drops trailing defaults)."""
        values = list(args) + [kwargs.get(n, d) for n, d in zip(self.names[len(args) :], self.defaults[len(args) :])]
        return values

    def split(self, values: list) -> tuple[tuple, list]:
        """(the program's key: _TENSOR at given tensors, the value elsewhere; the given tensors)."""
        key, tensors = [], []
        for v, is_tensor in zip(values, self.tensor):
            if is_tensor and v is not None:
                key.append(_TENSOR)
                tensors.append(v)
            else:
                key.append(tuple(v) if isinstance(v, list) else v)
        return tuple(key), tensors

    def invoke(self, values: list):
        """`fn` on `values` (arrays at tensor positions): results normalised to a tuple of arrays."""
        args = [v for v, k in zip(values, self.keyword) if not k]
        kwargs = {n: v for n, v, k in zip(self.names, values, self.keyword) if k}
        out = self.fn(*args, **kwargs)
        outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        if len(outs) != self.results:
            raise TypeError(
                f"{self.name} returned {len(outs)} arrays where its schema has {self.results} results; "
                "annotate the return type (-> tuple[jax.Array, jax.Array]) or fix schema="
            )
        return tuple(jnp.asarray(o) for o in outs)

    def program(self, key: tuple) -> Callable:
        """`fn` jitted for this key: takes the tensor arguments' arrays, returns a tuple of arrays."""
        lookup = tuple(map(_exact, key))
        program = self._programs.get(lookup)
        if program is None:

            def body(*arrays):
                given = iter(arrays)
                return self.invoke([next(given) if k is _TENSOR else k for k in key])

            program = self._programs[lookup] = jax.jit(body)
        return program

    def results_of(self, outs: tuple, wrap: Callable):
        wrapped = tuple(wrap(o) for o in outs)
        return wrapped[0] if self.results == 1 else wrapped

    def on_jax(self, *args, **kwargs):
        key, tensors = self.split(self.bind(args, kwargs))
        try:
            outs = self.program(key)(*(J(t) for t in tensors))
        except jax.errors.JaxRuntimeError as error:
            tensor.raise_if_out_of_memory(error)
            raise
        return self.results_of(outs, tensor.wrap)

    def on_cpu(self, *args, **kwargs):
        # CompositeExplicitAutograd: every device without a kernel of its own lands here.
        key, tensors = self.split(self.bind(args, kwargs))
        for t in tensors:
            if t.device.type != "cpu":
                raise RuntimeError(f"{self.name} runs on jax and CPU tensors, not on {t.device.type} tensors")
        cpu = jax.devices("cpu")[0]
        outs = self.program(key)(*(jax.device_put(dtypes.cpu_to_numpy(t), cpu) for t in tensors))
        return self.results_of(outs, lambda a: dtypes.numpy_to_cpu(np.asarray(a), dtypes.to_torch_dtype(a.dtype)))

    def fake(self, *args, **kwargs):
        key, tensors = self.split(self.bind(args, kwargs))
        # int() of a symbolic size specializes it: XLA programs have static shapes anyway.
        structs = [jax.ShapeDtypeStruct(tuple(int(s) for s in t.shape), dtypes.to_jax_dtype(t.dtype)) for t in tensors]
        outs = jax.eval_shape(self.program(key), *structs)
        device = tensors[0].device if tensors else torch.device("cpu")  # none given: the CPU kernel runs
        return self.results_of(
            outs, lambda o: torch.empty(o.shape, dtype=dtypes.to_torch_dtype(o.dtype), device=device)
        )


class _Tensor:
    """The marker of a given tensor argument in a program's key."""

    def __repr__(self) -> str:
        return "<tensor>"


_TENSOR = _Tensor()


def _exact(v):
    """`v` as a dict key that tells apart what equality merges: 0.0 and -0.0, and NaN finds itself."""
    if isinstance(v, float):
        return (float, v.hex())
    return tuple(map(_exact, v)) if isinstance(v, tuple) else v


# --- backward -----------------------------------------------------------------------------------


def _vjp_schema(namespace: str, short: str, schema: torch._C.FunctionSchema) -> tuple[str, str]:
    """jaxdev_vjp::<ns>__<name>(Tensor? _cotangent0, ..., <the forward's arguments>, bool[] _wanted)
    -> one tensor per tensor argument (an empty one where no gradient is wanted)."""
    cotangents = [f"Tensor? _cotangent{i}" for i in range(len(schema.returns))]
    forward = [f"{_type_text(a.type)} {a.name}" for a in schema.arguments]
    grads = sum(_type_text(a.type).startswith("Tensor") for a in schema.arguments)
    returns = "Tensor" if grads == 1 else "(" + ", ".join(["Tensor"] * grads) + ")"
    return f"jaxdev_vjp::{namespace}__{short}", f"({', '.join([*cotangents, *forward, 'bool[] _wanted'])}) -> {returns}"


# PyTorch's complex gradient is the conjugate of JAX's cotangent (conjugate Wirtinger against JAX's
# plain transpose): the VJP runs on conjugated cotangents and its results are conjugated back, which
# for real dtypes changes nothing.
def _cotangent(c, o):
    if not jnp.issubdtype(o.dtype, jnp.inexact):
        return np.zeros(o.shape, jax.dtypes.float0)  # integer results carry no gradient
    return jnp.zeros(o.shape, o.dtype) if c is None else jnp.conj(c.astype(o.dtype))


def _vjp_function(call: _Call) -> Callable:
    """The JAX function of the vjp op: the forward's VJP at its arguments, for the wanted gradients."""
    n_out = call.results
    positions = [i for i, t in enumerate(call.tensor) if t]

    def vjp(*values):
        cotangents, forward, wanted = values[:n_out], list(values[n_out:-1]), values[-1]
        diff = [
            i
            for i, w in zip(positions, wanted)
            if w and forward[i] is not None and jnp.issubdtype(forward[i].dtype, jnp.inexact)
        ]

        def f(*differentiated):
            point = list(forward)
            for i, x in zip(diff, differentiated):
                point[i] = x
            return call.invoke(point)

        try:
            outs, pullback = jax.vjp(f, *(forward[i] for i in diff))
        except Exception as e:  # tracing only: a primitive without a VJP rule (a Pallas kernel)
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise RuntimeError(
                f"{call.name}: JAX cannot differentiate its function ({first}); register a backward with "
                f"torch.library.register_autograd({call.name!r}, ...)"
            ) from e
        grads = pullback(tuple(_cotangent(c, o) for c, o in zip(cotangents, outs)))
        grads = dict(zip(diff, (jnp.conj(g) for g in grads)))
        return tuple(grads.get(i, jnp.zeros((0,), jnp.float32)) for i in positions)

    return vjp


def _autograd(call: _Call, vjp_op) -> tuple[Callable, Callable]:
    """setup_context and backward for `torch.library.register_autograd`: the vjp op at the saved inputs."""
    positions = [i for i, t in enumerate(call.tensor) if t]
    keyword_names = [n for n, k in zip(call.names, call.keyword) if k]

    def setup_context(ctx, inputs, output, keyword_only_inputs=None):
        values = list(inputs) + [(keyword_only_inputs or {}).get(n) for n in keyword_names]
        ctx.save_for_backward(*(values[i] for i in positions))
        ctx.jax_values = [None if t else v for v, t in zip(values, call.tensor)]

    def backward(ctx, *grads):
        values = list(ctx.jax_values)
        for i, t in zip(positions, ctx.saved_tensors):
            values[i] = t
        # needs_input_grad covers the arguments the dispatcher passed (trailing defaults dropped)
        given = len(ctx.needs_input_grad)
        wanted = [i < given and ctx.needs_input_grad[i] for i in positions]
        result = [None] * given
        if not any(wanted):
            return tuple(result)
        out = vjp_op(*grads, *values, wanted)
        for i, g, w in zip(positions, out if isinstance(out, tuple) else (out,), wanted):
            if w:
                result[i] = g
        return tuple(result)

    return setup_context, backward
