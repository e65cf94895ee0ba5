"""Candidate arguments for a direct trial, built from the overload's schema (the package docstring
says how): `candidates(op)` yields (plan, builder) pairs; a builder gives the same values on every
call with the same seed, on CPU or on jax."""

from __future__ import annotations

from jaxdev.audit.facts import arguments, cpu_args
from jaxdev.audit.facts.aten import DTYPE_NAMES, HINT_DTYPES, INDEX_NAMES, INTS, MAX_CANDIDATES, SHAPES, STRINGS
from jaxdev.audit.schema_samples.values import fit_hint, place, to

LIKE = "like"  # out= plan: the dtypes (and count) of the functional overload's results on the same inputs
LIKE_SIZED = "like_sized"  # the same, out= tensors already of the results' shapes (ops that do not resize)
_LEFT_AS_DEFAULT = ("Optional[Generator]", "Optional[Layout]", "Optional[MemoryFormat]")
_OMIT = object()  # an argument left to the op's own default


class Unbuildable(Exception):
    """An argument of a type the schema builder cannot build (the overload is untriable)."""


class NoFunctional(Exception):
    """An out= plan LIKE without a functional overload to follow: the candidate is skipped."""


def is_out(a) -> bool:
    """Whether the schema argument `a` is an out= tensor."""
    return a.kwarg_only and a.alias_info is not None and a.alias_info.is_write


def _int_list(name: str, n: int | None, shape: tuple) -> list[int]:
    """A plausible int list for an argument named `name` of fixed length `n` (None: any)."""
    spatial = n or 2
    if name in ("size", "shape", "sizes") or (name == "output_size" and not n):
        return list(shape)
    if name in ("dims", "perm"):
        return list(range(len(shape)))
    if name == "dim":
        return [0] if shape else []
    if name in ("kernel_size", "output_size"):
        return [2] * spatial
    if name == "stride" and not n:  # as_strided and friends: the contiguous strides of the shape
        strides, step = [], 1
        for d in reversed(shape):
            strides.insert(0, step)
            step *= d
        return strides
    if name in ("stride", "dilation"):
        return [1] * spatial
    if name in ("padding", "output_padding"):
        return [0] * spatial
    if name == "pad":
        return [1, 1]
    if name == "repeats":
        return [1] * max(len(shape), 1)
    if name in ("split_sizes", "split_size"):
        return [1, shape[0] - 1] if shape and shape[0] > 1 else [1]
    return [1] * (n or len(shape) or 1)


def make_tensor(shape, dtype, gen, index: bool = False):
    """A small seeded random tensor: normal floats, integers in [0, 3), random bools; `index`: int64 in [0, 2)."""
    import torch

    if index:
        return torch.randint(0, 2, shape, generator=gen, dtype=torch.int64)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, generator=gen, dtype=dtype)
    return torch.randint(0, 3, shape, generator=gen, dtype=dtype)


def _out_plans(args) -> list:
    """The out= dtype plans to try: LIKE, LIKE_SIZED, then one dtype for all (index-named ones
    int64), and values with int64 indices; [()] without out= arguments."""
    outs = [a for a in args if is_out(a)]
    if not outs:
        return [()]
    plans: list = []
    for d in (None, "float32", "int64", "bool"):
        plan = tuple("int64" if a.name in INDEX_NAMES else d for a in outs)
        # values and indices (max.dim_max names its indices `max_values`)
        pair = (d,) + ("int64",) * (len(outs) - 1)
        for p in (plan, pair):
            if p not in plans:
                plans.append(p)
    return [LIKE, LIKE_SIZED, *plans]


def candidates(op, limit: int = MAX_CANDIDATES):
    """(plan, builder) for each candidate: builder(device, seed) -> (kwargs, written), the same
    values on every call with the same seed; `written` names the arguments the op writes.
    Order: variants (optionals left None / required optionals filled / every optional scalar or
    tensor filled; tensors other than the first one 0-d or not), then shapes, dtypes, out= dtypes."""
    import torch

    schema = op._schema
    args = schema.arguments
    out_plans = _out_plans(args)
    count = 0
    hint = arguments.hint_for(str(schema.name).split("::", 1)[-1])
    if hint is not None:
        for dname in HINT_DTYPES:
            for out_plan in out_plans:
                count += 1
                yield ("hint", dname, out_plan), builder(op, (), getattr(torch, dname), out_plan, hint=hint)
    tensors = [a for a in args if not is_out(a) and "Tensor" in str(a.real_type)]
    optionals = [a for a in args if str(a.real_type).startswith("Optional[")]
    required = [a.name for a in optionals if not a.has_default_value()]
    fills = (
        [0]
        + ([1] if required else [])
        + ([2] if optionals else [])
        + ([("one", n) for n in required] * (len(required) > 1))
    )
    scalar_others = [False, True] if len(tensors) > 1 else [False]
    for fill in fills:
        for zero_d in scalar_others:
            for shape in SHAPES:
                for dname in DTYPE_NAMES:
                    for out_plan in out_plans:
                        count += 1
                        if count > limit:
                            return
                        plan = (shape, dname, out_plan, fill, zero_d)
                        yield plan, builder(op, shape, getattr(torch, dname), out_plan, fill, zero_d)


def builder(op, shape, dtype, out_plan, fill: int = 0, zero_d: bool = False, given: dict | None = None, hint=None):
    """build(device, seed) -> (kwargs, written) for one candidate. `given`: argument values taken
    from a captured call (OpInfo donors): used as they are. `hint`: a facts.arguments builder,
    called per build with its own generator (seeded like the rest), its values fitted to the schema
    (fit_hint). `out_plan` LIKE: out= tensors of the dtypes (and count) the functional overload
    returns on the same inputs on CPU (like_functional)."""
    return _Candidate(op, shape, dtype, out_plan, fill, zero_d, given, hint).build


class _Candidate:
    """One candidate's recipe; `build` runs it for a device and a seed."""

    def __init__(self, op, shape, dtype, out_plan, fill, zero_d, given, hint):
        self.op, self.shape, self.dtype, self.out_plan = op, shape, dtype, out_plan
        self.fill, self.zero_d, self.given, self.hint = fill, zero_d, given, hint
        args = op._schema.arguments
        self.has_tensor = any("Tensor" in str(a.real_type) for a in args if not is_out(a))
        self.first_tensor = next((a.name for a in args if "Tensor" in str(a.real_type)), None)
        self.on_cpu = cpu_args(op.name()).names

    def build(self, device: str, seed: int):
        import torch

        schema = self.op._schema
        gen = torch.Generator().manual_seed(seed)
        kwargs: dict = {}
        written: list[str] = []
        given = self.given
        if self.hint is not None:  # CPU values (facts.arguments.Ctx), made on CPU though a peer's modes are on
            from jaxdev.audit import devices

            with devices.current().outside():
                hinted = self.hint(arguments.Ctx(torch.Generator().manual_seed(seed + 7919), self.dtype))
            given = fit_hint(hinted, schema)
        out_args = []
        for a in schema.arguments:
            if a.alias_info is not None and a.alias_info.is_write:
                written.append(a.name)
            if is_out(a):
                out_args.append(a)
                continue
            if given is not None and a.name in given:
                kwargs[a.name] = place(given[a.name], device)
                continue
            value = self._value(a, device, gen)
            if value is not _OMIT:
                kwargs[a.name] = value
        self._outs(out_args, kwargs, device)
        return kwargs, written

    def _tensor(self, name: str, device: str, gen):
        import torch

        if name in INDEX_NAMES:
            return make_tensor((2,), torch.int64, gen, index=True).to(device)
        kind = torch.bool if "mask" in name else self.dtype
        shaped = () if self.zero_d and name != self.first_tensor else self.shape
        return make_tensor(shaped, kind, gen).to(device)

    def _value(self, a, device: str, gen):
        """The value of a non-out= argument, or _OMIT to leave the op's default."""
        import torch

        t, name = str(a.real_type), a.name
        if name in self.on_cpu:
            return make_tensor((), torch.int64, gen) + 1 if name == "high" else torch.tensor([1, 2])
        if t.startswith("Optional["):
            fill = self.fill
            filled = fill == 2 or (fill == 1 and not a.has_default_value()) or fill == ("one", name)
            if not filled or t in _LEFT_AS_DEFAULT:
                if not a.has_default_value():
                    return None
                if name == "device" and not self.has_tensor:
                    return torch.device(device)
                return _OMIT
            if t == "Optional[bool]" and a.has_default_value():
                return _OMIT
            t = t[len("Optional[") : -1]
        elif a.has_default_value() and not (name == "device" and not self.has_tensor):
            return _OMIT  # the op's own default
        return self._typed(t, a, device, gen)

    def _typed(self, t: str, a, device: str, gen):
        """A value of schema type `t` (not optional) for the argument `a`."""
        import torch

        name = a.name
        if t == "Tensor":
            return self._tensor(name, device, gen)
        if t == "List[Tensor]":
            return [self._tensor(name, device, gen), self._tensor(name, device, gen)]
        if t == "List[Optional[Tensor]]":
            return [make_tensor((2,), torch.int64, gen, index=True).to(device)]
        if t in ("Optional[Device]", "Device"):
            return torch.device(device) if not self.has_tensor or t == "Device" else None
        if t in ("List[int]", "List[SymInt]"):
            return _int_list(name, a.N, self.shape)
        fixed = {
            "float": lambda: 0.5,
            "bool": lambda: False,
            "number": lambda: 2,
            "int": lambda: INTS.get(name, 1),
            "SymInt": lambda: INTS.get(name, 1),
            "str": lambda: STRINGS.get(name, "sum"),
            "List[number]": lambda: [2, 2],
            "List[float]": lambda: [0.5] * (a.N or 2),
            "List[bool]": lambda: [True] * (a.N or 3),
            "ScalarType": lambda: self.dtype,
            "Layout": lambda: torch.strided,
            "MemoryFormat": lambda: torch.contiguous_format,
        }
        if t in fixed:
            return fixed[t]()
        raise Unbuildable(f"{name}: {a.real_type}")

    def _outs(self, out_args, kwargs: dict, device: str) -> None:
        """The out= tensors, empty (LIKE_SIZED: of the functional results' shapes)."""
        import torch

        if self.out_plan in (LIKE, LIKE_SIZED) and out_args:
            # (dtype, shape) per out= tensor, a list of them for a Tensor[] one
            metas = like_functional(self.op, out_args, kwargs, self.dtype)
        else:
            metas = []
            outs = iter(() if self.out_plan in (LIKE, LIKE_SIZED) else self.out_plan)
            for a in out_args:
                d = next(outs, None)
                meta = (self.dtype if d is None else getattr(torch, d), (0,))
                metas.append([meta, meta] if str(a.real_type).startswith("List") else meta)

        def empty(meta, name):
            size = meta[1] if self.out_plan == LIKE_SIZED else (0,)
            return torch.empty(size, dtype=meta[0], device="cpu" if name in self.on_cpu else device)

        for a, meta in zip(out_args, metas):
            kwargs[a.name] = [empty(m, a.name) for m in meta] if isinstance(meta, list) else empty(meta, a.name)


def _functional_of(op):
    """The overload of the same name whose arguments are this out= overload's inputs and that
    writes nothing (`fft_rfft` for `fft_rfft.out`), or None."""
    import torch

    schema = op._schema
    inputs = [a.name for a in schema.arguments if not is_out(a)]
    namespace, base = str(schema.name).split("::", 1)
    packet = getattr(getattr(torch.ops, namespace), base, None)
    for name in packet.overloads() if packet is not None else ():
        candidate = getattr(packet, name)
        args = candidate._schema.arguments
        if any(a.alias_info is not None and a.alias_info.is_write for a in args):
            continue
        if [a.name for a in args] == inputs:
            return candidate
    return None


def like_functional(op, out_args, kwargs, dtype) -> list:
    """(dtype, shape) per out= tensor (a list of them for a Tensor[] out) from the functional
    overload's results on these inputs on CPU (an undefined result: the candidate's dtype, empty);
    raises when there is no functional overload or it rejects the inputs (the candidate is skipped).
    Built inside the device's context (devices.Device.context), the CPU run steps outside it."""
    import torch
    from torch.utils._pytree import tree_flatten

    functional = _functional_of(op)
    if functional is None:
        raise NoFunctional(f"{op._schema.name} has no functional overload to take out= dtypes from")
    from jaxdev.audit import devices
    from jaxdev.audit.calls import invoke

    on_cpu = to(dict(kwargs), "cpu")
    with devices.current().outside():  # CPU's run, not the device's (a peer's modes would take it)
        results = invoke(functional, on_cpu)
    leaves = [r for r in tree_flatten(results)[0] if r is None or isinstance(r, torch.Tensor)]
    metas = [(dtype, (0,)) if r is None else (r.dtype, tuple(r.shape)) for r in leaves]
    if len(out_args) == 1 and str(out_args[0].real_type).startswith("List"):
        return [metas]
    if len(metas) < len(out_args):
        raise NoFunctional(f"{functional._schema.name} returns {len(metas)} tensors for {len(out_args)} out= ones")
    return metas[: len(out_args)]
