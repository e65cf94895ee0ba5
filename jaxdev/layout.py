"""The strides PyTorch gives an op's results, so jax results are laid out as CPU's are.

PyTorch decides a result's layout from its inputs' strides: an elementwise (TensorIterator) op writes
a dense result in the memory order of its inputs (`x.t() + 1` is transposed; the first input decides
where they disagree), convolution, batch norm, pooling and upsampling keep channels_last, and so on.
Two sources, as PyTorch has two:
* eager results follow CPU. Pointwise ops (`torch.Tag.pointwise`) by TensorIterator's own rule,
  ported below (`elementwise_strides`: its fast set-up, `compute_strides` and `reorder_dimensions`;
  equal to CPU's strides on 4,000 random layouts of 1-3 inputs, size-1 dims included). Other ops
  by their fake kernel on CPU twins of the arguments (CPU's structured meta functions, CPU's
  channels_last convolution);
* inside a compiled program they follow what AOTAutograd planned: the fake kernel on twins on the
  jax device, the FakeTensors its graph was traced with (they differ from CPU where PyTorch's Python
  meta kernels do: an elementwise op breaks stride ties differently). A program's views of its
  intermediates are replayed from those strides.

Answers are cached per (op, arguments' shapes, strides and dtypes, non-float arguments), so a
training loop pays each once per layout. Inputs that are all contiguous give contiguous results (the
common case costs one `is_contiguous` per tensor argument and no lookup); an op whose fake kernel
fails (none, or data-dependent shapes) keeps contiguous results. The first fake-kernel answer in a
process imports FakeTensorMode's dependencies (sympy): a one-time cost of seconds.
"""

from __future__ import annotations

import contextlib
import functools
import warnings

import torch
from torch._ops import OpOverload

from jaxdev import native
from jaxdev.core.limits import dense_layout

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


_PLAIN = frozenset({int, bool, type(None), str, torch.dtype, torch.memory_format, torch.layout, torch.device})


def _key(x, nested: bool = False):
    kind = type(x)
    if kind in _PLAIN:  # by type first: isinstance against torch.Tensor is slow for non-tensors
        return x
    if kind is float:
        # A float argument decides no layout: `leaky_relu(x, 0.1)` and `(x, 0.2)` share one entry
        # (floats in lists are kept: scale factors decide shapes).
        return x if nested else _FLOAT
    if kind is list or kind is tuple:
        return tuple([_key(a, True) for a in x])
    if isinstance(x, _Tensor):
        return (x.shape, x.stride(), x.dtype, x.is_cpu)  # torch.Size hashes as a tuple
    if isinstance(x, float):
        return x if nested else _FLOAT
    if isinstance(x, complex):
        return _COMPLEX
    if isinstance(x, torch.Generator):
        return _GENERATOR
    return x


def is_plain(t: torch.Tensor) -> bool:
    """Contiguous with PyTorch's default strides. `is_contiguous()` ignores the strides of size-1
    (and size-0) dims, but TensorIterator does not: (10, 3, 1, 1) with strides (3, 1, 3, 3) is
    contiguous, and CPU lays `x + y` out channels_last from it."""
    if not t.is_contiguous():
        return False
    shape = t.shape
    return not (1 in shape or 0 in shape) or t.stride() == _default_strides(tuple(shape))


@functools.lru_cache(maxsize=4096)
def _default_strides(shape: tuple) -> tuple:
    out, acc = [], 1
    for n in reversed(shape):
        out.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(out))


def all_contiguous(args, kwargs) -> bool:
    if _all_plain is not None:
        return _all_plain(args) and (not kwargs or _all_plain(tuple(kwargs.values())))
    for a in args:
        if isinstance(a, torch.Tensor):
            if not is_plain(a):
                return False
        elif isinstance(a, (list, tuple)):
            for x in a:
                if isinstance(x, torch.Tensor) and not is_plain(x):
                    return False
    if kwargs:
        return all_contiguous(tuple(kwargs.values()), None)
    return True


# all_contiguous in one native call (jaxdev/native.py), when the module is in use.
_all_plain = native.module.all_plain if native.module is not None else None


def result_layouts(op: OpOverload, args, kwargs, traced: bool) -> tuple | None:
    """Per result of `op(*args, **kwargs)`: (shape, strides) as PyTorch lays it out, or None for a
    non-tensor; None for all: contiguous."""
    if all_contiguous(args, kwargs) and not lays_out_itself(op):
        return None
    return cached_layouts(op, args, kwargs, traced)


def cached_layouts(op: OpOverload, args, kwargs, traced: bool) -> tuple | None:
    """result_layouts for a call known to have a non-plain argument (or an op that lays out its results
    itself): the answer cached per key. The hot path of every such op (a Linear's addmm reads the
    weight transposed): a plain jax tensor's key is built inline, without a call of _key, and the key is
    hashed once, by the lookup (an unhashable one raises there)."""
    try:
        parts = [op, traced]
        for a in args:
            if type(a) is _Tensor:
                parts.append((a.shape, a.stride(), a.dtype, a.is_cpu))
            else:
                parts.append(_key(a))
        if kwargs:
            parts.extend([(k, _key(v)) for k, v in kwargs.items()])
        key = tuple(parts)
        found = _CACHE.get(key, _CACHE)
    except TypeError:
        return computed_layouts(op, args, kwargs, traced)
    if found is _CACHE:
        if len(_CACHE) >= _CACHE_SIZE:  # shapes that keep changing (no lasting layouts): start over
            _CACHE.clear()
        found = _CACHE[key] = computed_layouts(op, args, kwargs, traced)
    return found


_CACHE_SIZE = 1 << 14
# Ops whose CPU result is not contiguous even from contiguous inputs: the FFTs put the transformed dims
# innermost (pocketfft/MKL write them that way); their fake kernels say so.
_OWN_LAYOUT = frozenset({"aten::_fft_r2c", "aten::_fft_c2r", "aten::_fft_c2c"})


@functools.cache
def lays_out_itself(op: OpOverload) -> bool:
    return op.name() in _OWN_LAYOUT


# Pointwise ops whose CPU kernel does not lay out its result by TensorIterator's rule: they clone the
# input contiguous first (found by running every other pointwise op with a jax kernel on a transposed
# input on CPU: 64 of 66 tested follow the rule).
_NOT_ITERATOR = frozenset({"aten::masked_fill.Scalar", "aten::masked_fill.Tensor", "aten::mvlgamma"})
# Ops without the pointwise tag whose CPU kernel is TensorIterator's all the same (floor_divide's fake
# kernel breaks a tie between its inputs' layouts the other way: a permuted input over a contiguous one
# gave a contiguous result on jax, the input's layout on CPU); and ops whose CPU kernel writes a
# contiguous result whatever its input's layout, where the rule or the fake kernel says otherwise:
# angle of a complex tensor (angle_out into an empty result), log_sigmoid_forward and rrelu_with_noise
# (empty_like(self, LEGACY_CONTIGUOUS_MEMORY_FORMAT)). Both found by OpInfo's reference inputs.
_ITERATOR_UNTAGGED = frozenset({"aten::floor_divide", "aten::floor_divide.Scalar"})
_CONTIGUOUS = {
    "aten::angle": lambda args: args[0].is_complex(),
    "aten::log_sigmoid_forward": lambda args: True,
    "aten::rrelu_with_noise": lambda args: True,
}


def computed_layouts(op: OpOverload, args, kwargs, traced: bool) -> tuple | None:
    """result_layouts without the cache."""
    contiguous = _CONTIGUOUS.get(op.name())
    if not traced and contiguous is not None and contiguous(args):
        return None
    iterator = torch.Tag.pointwise in op.tags or op.name() in _ITERATOR_UNTAGGED
    if not traced and iterator and op.name() not in _NOT_ITERATOR:
        operands = [(tuple(t.shape), t.stride()) for t in _tensors(args, kwargs)]
        # A Python number passed for a Tensor argument (x * 2: mul.Tensor) is a 0-dim operand of the
        # iterator (a wrapped number); operands of different shapes skip TensorIterator's fast set-up, so
        # an ambiguous layout ((10,3,1,1) with strides (3,1,3,3)) is kept as the input's, as on CPU.
        if any(_number_for_tensor(op, args)):
            operands.append(((), ()))
        layout = (elementwise_shape([s for s, _ in operands]), elementwise_strides(operands))
        return (layout,) * len(op._schema.returns)
    return _fake_layouts(op, args, kwargs, traced)


def _number_for_tensor(op: OpOverload, args):
    for a, spec in zip(args, op._schema.arguments):
        yield isinstance(a, (int, float, complex, bool)) and isinstance(spec.type, torch.TensorType)


def _tensors(args, kwargs):
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            yield a


# --- TensorIterator's output layout (aten/src/ATen/TensorIterator.cpp), for pointwise ops ---------------


def elementwise_shape(shapes) -> tuple[int, ...]:
    """The broadcast shape of the operands."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s):
            if n != 1:
                out[ndim - len(s) + i] = n
    return tuple(out)


def _dense_strides(shape, order) -> tuple[int, ...]:
    """Strides laying `shape` out densely in `order` (innermost dim first): TensorIterator's
    compatible_stride."""
    strides = [0] * len(shape)
    acc = 1
    for d in order:
        strides[d] = acc
        acc *= shape[d]
    return tuple(strides)


def _dense_in(shape, strides, order) -> bool:
    """Dense in `order` (innermost first), ignoring size-1 dims: is_contiguous(memory_format)."""
    expected = 1
    for d in order:
        if shape[d] != 1:
            if strides[d] != expected:
                return False
            expected *= shape[d]
    return True


def elementwise_strides(operands) -> tuple[int, ...]:
    """The strides TensorIterator gives a new output from its inputs' (shape, strides), in operand
    order: the fast set-up (all of one shape and contiguous, channels_last, or dense with equal
    strides) or else the dims sorted by the inputs' strides (the first input with a strict order
    decides; broadcast dims are skipped; equal strides put the smaller dim inside)."""
    shapes = [s for s, _ in operands]
    shape = elementwise_shape(shapes)
    ndim = len(shape)
    if ndim == 0:
        return ()
    if all(s == shape for s in shapes):
        if all(_dense_in(s, st, range(ndim - 1, -1, -1)) for s, st in operands):
            return _dense_strides(shape, range(ndim - 1, -1, -1))
        if ndim == 4 and all(_dense_in(s, st, (1, 3, 2, 0)) for s, st in operands):
            return _dense_strides(shape, (1, 3, 2, 0))
        first = tuple(operands[0][1])
        if all(dense_layout(s, st) and tuple(st) == first for s, st in operands):
            return first
    strides = []
    for s, st in operands:  # compute_strides: a broadcast dim has stride 0
        off = ndim - len(s)
        strides.append([0] * off + [0 if (n == 1 and shape[off + i] != 1) else st[i] for i, n in enumerate(s)])
    if ndim == 1:
        return (1,)
    return _dense_strides(shape, iteration_order(shape, strides))


def iteration_order(shape, operand_strides) -> list[int]:
    """TensorIterator's reorder_dimensions: the dims innermost first, by an insertion sort that
    allows ambiguous comparisons (a broadcast stride decides nothing; equal strides put the larger
    size outside). `operand_strides`: each operand's strides, broadcast dims 0."""
    ndim = len(shape)
    perm = list(range(ndim - 1, -1, -1))

    def should_swap(d0, d1):
        for st in operand_strides:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    for i in range(1, ndim):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    return perm


_MODE = None


def _fake_mode():
    global _MODE
    if _MODE is None:
        from torch._subclasses.fake_tensor import FakeTensorMode

        _MODE = FakeTensorMode()
    return _MODE


_PYTHON_KEYS = (torch._C.DispatchKey.Python, torch._C.DispatchKey.PythonTLSSnapshot)


def _python_dispatch():
    """Python dispatch on for a FakeTensorMode call where the caller turned it off. A tensor constructor
    (`torch.tensor([], device="jax")`) excludes the Python keys around its host-to-device copy, whose
    kernel can flush fused eager's segment, whose trace asks for layouts here: with the keys excluded
    the fake twins went to CPU's real kernel, which read their missing data (a segfault in `cat`,
    transformers' DynamicLayer under fused eager)."""
    excluded = torch._C._dispatch_tls_local_exclude_set()
    if not any(excluded.has(key) for key in _PYTHON_KEYS):
        return contextlib.nullcontext()
    for key in _PYTHON_KEYS:
        excluded = excluded.remove(key)
    return torch._C._ForceDispatchKeyGuard(torch._C._dispatch_tls_local_include_set(), excluded)


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
        with _python_dispatch(), mode, warnings.catch_warnings():
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
