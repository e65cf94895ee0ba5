"""The strides PyTorch gives an op's results, so jax results are laid out as CPU's are.

PyTorch decides a result's layout from its inputs' strides: an elementwise (TensorIterator) op writes
a dense result in the memory order of its inputs (`x.t() + 1` is transposed; the first input decides
where they disagree), convolution, batch norm, pooling and upsampling keep channels_last, and so on.
The rule is PyTorch's own, taken from its fake (meta) kernels: the op runs once on fake twins of its
arguments, and the strides it reports are cached per (op, arguments' shapes, strides and dtypes,
non-float arguments), so a training loop pays it once per layout.

Two sources, as PyTorch has two:
* eager results follow CPU: the fake twins are CPU tensors, whose fake kernels are CPU's structured
  meta functions (TensorIterator's own `reorder_dimensions`, channels_last convolution);
* inside a compiled program they follow what AOTAutograd planned: fake twins on the jax device, the
  FakeTensors its graph was traced with (they differ from CPU where PyTorch's Python meta kernels
  do: a convolution of a channels_last input is contiguous there, and an elementwise op breaks
  stride ties differently). A program's views of its intermediates are replayed from those strides.

Inputs that are all contiguous give contiguous results (the common case costs one `is_contiguous`
per tensor argument and no lookup); an op whose fake kernel fails (none, or data-dependent shapes)
keeps contiguous results.
"""

from __future__ import annotations

import warnings

import torch
from torch._ops import OpOverload

aten = torch.ops.aten

# Ops whose fake kernel is another op's: PrivateUse1's convolution hooks have none of their own.
_FAKE_AS: dict[str, tuple[OpOverload, object]] = {}


def _convolution_backward_args(args, kwargs):
    grad_output, input, weight, stride, padding, dilation, transposed, output_padding, groups, mask = args
    bias_sizes = [weight.shape[1] * groups if transposed else weight.shape[0]]
    return (
        grad_output,
        input,
        weight,
        bias_sizes,
        stride,
        padding,
        dilation,
        transposed,
        output_padding,
        groups,
        mask,
    ), {}


def _fake_as() -> dict:
    if not _FAKE_AS:
        _FAKE_AS["aten::convolution_overrideable"] = (aten.convolution.default, None)
        _FAKE_AS["aten::convolution_backward_overrideable"] = (
            aten.convolution_backward.default,
            _convolution_backward_args,
        )
    return _FAKE_AS


_CACHE: dict[tuple, tuple | None] = {}
_FLOAT, _COMPLEX, _GENERATOR = object(), object(), object()


_Tensor = torch.Tensor


def _key(x):
    if isinstance(x, _Tensor):
        return (x.shape, x.stride(), x.dtype, x.is_cpu)  # torch.Size hashes as a tuple
    if isinstance(x, (list, tuple)):
        return tuple([_key(a) for a in x])
    if isinstance(x, float):  # a float's value decides no layout: `x * 0.5` and `x * 2.0` share one entry
        return _FLOAT
    if isinstance(x, complex):
        return _COMPLEX
    if isinstance(x, torch.Generator):
        return _GENERATOR
    return x


def _all_contiguous(args, kwargs) -> bool:
    for a in args:
        if isinstance(a, torch.Tensor):
            if not a.is_contiguous():
                return False
        elif isinstance(a, (list, tuple)):
            for x in a:
                if isinstance(x, torch.Tensor) and not x.is_contiguous():
                    return False
    if kwargs:
        return _all_contiguous(tuple(kwargs.values()), None)
    return True


def result_layouts(op: OpOverload, args, kwargs, traced: bool) -> tuple | None:
    """Per result of `op(*args, **kwargs)`: (shape, strides) as PyTorch lays it out, or None for a
    non-tensor; None for all: contiguous."""
    if _all_contiguous(args, kwargs):
        return None
    try:
        key = (op, traced, _key(args), _key(tuple(kwargs.items())) if kwargs else ())
        hash(key)
    except TypeError:
        return _fake_layouts(op, args, kwargs, traced)
    found = _CACHE.get(key, _CACHE)
    if found is _CACHE:
        found = _CACHE[key] = _fake_layouts(op, args, kwargs, traced)
    return found


_MODE = None


def _fake_mode():
    global _MODE
    if _MODE is None:
        from torch._subclasses.fake_tensor import FakeTensorMode

        _MODE = FakeTensorMode()
    return _MODE


def _fake_layouts(op: OpOverload, args, kwargs, traced: bool) -> tuple | None:
    mode = _fake_mode()
    converter = mode.fake_tensor_converter

    def twin(x):
        if isinstance(x, torch.Tensor):
            device = x.device if x.device.type != "jax" or traced else torch.device("cpu")
            meta = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
            return converter.from_meta_and_device(mode, meta, device)
        if isinstance(x, (list, tuple)):
            return type(x)(twin(a) for a in x)
        if isinstance(x, torch.Generator):
            return None
        return x

    target, adapt = _fake_as().get(op.name(), (op, None))
    try:
        fargs = [twin(a) for a in args]
        fkwargs = {k: twin(v) for k, v in kwargs.items()}
        if adapt is not None:
            fargs, fkwargs = adapt(fargs, fkwargs)
        with mode, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = target(*fargs, **fkwargs)
    except Exception:  # no fake kernel, data-dependent output, a check that only values can pass
        return None
    outs = out if isinstance(out, (list, tuple)) else (out,)
    layouts = tuple((tuple(o.shape), tuple(o.stride())) if isinstance(o, torch.Tensor) else None for o in outs)
    return layouts if any(layouts) else None


# --- FakeTensors of convolutions on the jax device: CPU's memory format --------------------------------


def install_fake_convolution() -> None:
    """FakeTensor's convolution rule, for tensors on the jax device, gives CPU's layout.

    PyTorch picks a convolution's memory format from the backend it would select for the device:
    for PrivateUse1 that is `Overrideable`, always contiguous, where CPU's kernels keep channels_last.
    jaxdev's eager convolutions are laid out as CPU's, so the FakeTensors that AOTAutograd plans a
    compiled graph with are too: the rule runs on CPU twins of the arguments and its results are
    moved to the jax device with the strides CPU's rule gave (static shapes only; under symbolic
    shapes PyTorch's own answer stands)."""
    from torch._subclasses import fake_impls

    for op in (aten.convolution.default, aten._convolution.default, aten.convolution_backward.default):
        original = fake_impls.op_implementations_dict.get(op)
        if original is None or getattr(original, "_jaxdev", False):
            continue
        fake_impls.op_implementations_dict[op] = _cpu_laid_out(original)


def _cpu_laid_out(original):
    from torch._subclasses.fake_tensor import FakeTensor

    cpu = torch.device("cpu")

    def on_jax(x) -> bool:
        return isinstance(x, FakeTensor) and x.fake_device.type == "jax"

    def static(x) -> bool:
        return all(isinstance(n, int) for n in (*x.shape, *x.stride()))

    def impl(fake_mode, func, *args, **kwargs):
        out = original(fake_mode, func, *args, **kwargs)
        tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, FakeTensor)]
        if not any(on_jax(a) for a in tensors) or not all(static(a) for a in tensors):
            return out

        def twin(x):
            if on_jax(x):
                meta = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
                return FakeTensor(fake_mode, meta, cpu)
            return x

        try:
            reference = original(fake_mode, func, *[twin(a) for a in args], **{k: twin(v) for k, v in kwargs.items()})
        except Exception:
            return out

        def relaid(o, r):
            if not isinstance(o, FakeTensor) or not isinstance(r, torch.Tensor) or o.stride() == r.stride():
                return o
            if not static(o) or tuple(o.shape) != tuple(r.shape):
                return o
            meta = torch.empty_strided(o.shape, r.stride(), dtype=o.dtype, device="meta")
            return FakeTensor(fake_mode, meta, o.fake_device)

        if isinstance(out, tuple):
            return tuple(relaid(o, r) for o, r in zip(out, reference))
        return relaid(out, reference)

    impl._jaxdev = True
    return impl

