"""What a graph program's call hands back: its outputs rebuilt from the program's arrays (new
storages, views of its inputs' storages, its arguments themselves, constants), and the random state's
stand-in for a program that draws nothing, its check flag as it is read, and a written storage's value
where a check failed (jaxdev/graphs/program.py)."""

from __future__ import annotations

import functools
import operator

import jax
import jax.numpy as jnp
import torch

from jaxdev import dtypes, native, rng, tensor, tracing
from jaxdev.tensor import Box, transpose_program

# tensor_on_storage in C++ (jaxdev/csrc/graph_inputs.cpp): no empty tensor, no set_ through the dispatcher.
_native_view = native.module.graph_view if native.module is not None else None


def rebuild(spec, new_arrays, args, inputs) -> list:
    """A call's outputs from its program's new arrays, as `spec` (a Specialisation) traced them."""
    wrap, new_storage = tensor.wrap, tensor.new_storage
    made = [
        wrap(a) if sole else new_storage(Box(a, numel, dtype))
        for a, (numel, dtype), sole in zip(new_arrays, spec.new_storages, spec.wrapped)
    ]
    results = []
    for out in spec.outputs:
        kind = out[0]
        if kind == "new":
            k = out[1]
            if spec.wrapped[k]:
                results.append(made[k])
                continue
            t = on_storage(made[k], out[2])
            results.append(t.cpu() if out[3] else t)
        elif kind == "arg":
            results.append(args[out[1]])
        elif kind == "input":
            g, meta = out[1], out[2]
            if g in inputs.cpu:
                dtype, shape, stride, offset = meta[:4]
                results.append(torch.empty(0, dtype=dtype).set_(inputs.storages[g], offset, shape, stride))
            else:
                results.append(on_storage(inputs.storages[g], meta))
        elif kind == "constant":
            results.append(out[1].clone())
        else:
            results.append(out[1])
    return results


def sole_outputs(specs: list, new_arrays: list, new_meta: list) -> list[bool]:
    """Per new storage: whether its one output is the whole storage, contiguous, in the storage's dtype,
    with no conj/neg bit. Its array then leaves the program in the output's shape (a reshape XLA does
    for free), and the call makes the output with the native wrap (tensor, storage and box at once,
    0.5 us) instead of a storage and then a tensor on it (4 us), an output as likely to be read
    whole (a loss, logits, a saved activation) then needing no reshaping program."""
    users = [0] * len(new_arrays)
    for spec in specs:
        if spec[0] == "new":
            users[spec[1]] += 1
    wrapped = [False] * len(new_arrays)
    for spec in specs:
        if spec[0] != "new" or users[spec[1]] != 1 or spec[3]:
            continue
        k, (dtype, shape, stride, offset, conj, neg) = spec[1], spec[2]
        numel, stored = new_meta[k]
        if offset or conj or neg or dtype != stored or shape.numel() != numel:
            continue
        if stride != tensor.contiguous_strides(shape) or dtypes.JAX_TO_TORCH.get(new_arrays[k].dtype) != dtype:
            continue
        new_arrays[k] = new_arrays[k].reshape(tuple(shape))
        wrapped[k] = True
    return wrapped


# False: every check flag read by bool(array) (benchmarks/compiled_latency.py --compare read)
FAST_FLAG_READ = True


class CheckFlag:
    """A call's value-check flag as tracing reads it (`bool(flag)`, at the next call or sync): a one-device
    flag through JAX's C++ host copy, which `bool(array)` reached through a profiler annotation and
    sharding checks in Python (~40 us of the LM's batch-1 forward on a loaded CPU,
    benchmarks/compiled_latency.py --compare read); any other as `bool(array)` reads it."""

    __slots__ = ("array",)

    def __init__(self, array: jax.Array):
        self.array = array

    def __bool__(self) -> bool:
        a = self.array
        if FAST_FLAG_READ and isinstance(a.sharding, jax.sharding.SingleDeviceSharding):
            read = getattr(a, "_single_device_array_to_np_array_did_copy", None)  # what ArrayImpl._value calls
            if read is not None:
                return bool(read()[0])
        return bool(a)


def on_accelerator(flag: jax.Array) -> bool:
    """Whether a call's check flag lives off the host (its host copy is then worth starting at once)."""
    return any(d.platform != "cpu" for d in flag.sharding.device_set)


def hold(owner, flag: jax.Array, prefetch: bool, raise_error) -> None:
    """A call's check flag held until the next call of `owner` or a sync (tracing.defer_check), read there
    as a CheckFlag; `prefetch`: its host copy started now (where the program runs on an accelerator: the
    read then finds the flag on the host). A compiled graph's call and fused eager's flush."""
    if prefetch:
        flag.copy_to_host_async()
    tracing.defer_check(owner, CheckFlag(flag), raise_error)


_NO_DRAWS: dict = {}


def no_draws(arrays: list):
    """The state's stand-in for a program that draws nothing: the same shape and dtype, kept on the
    device of the call's arrays (the state itself, as host data, where they are spread over devices)."""
    sharding = arrays[0].sharding if arrays else None
    if not isinstance(sharding, jax.sharding.SingleDeviceSharding):
        return rng.traced_base()
    base = _NO_DRAWS.get(sharding)
    if base is None:
        base = _NO_DRAWS[sharding] = jax.device_put(rng.traced_base(), sharding)
    return base


def on_storage(storage, meta) -> torch.Tensor:
    dtype, shape, stride, offset, conj, neg = meta
    t = _native_view(storage, dtype, shape, stride, offset) if _native_view is not None else None
    if t is None:
        t = tensor.tensor_on_storage(storage, dtype, shape, stride, offset)
    if conj:
        torch._C._set_conj(t, True)
    if neg:
        torch._C._set_neg(t, True)
    return t


def as_before_failure(flags: list, states: list, boxes: list, g: int, either: dict):
    """Storage g's array after the program, or where a value check failed, as it was when the first
    failing op checked its inputs: a failed check raises that op's error at the next sync
    (program.py's Specialisation.run), and by then the call has written what eager mode had written before that op
    raised, and nothing after (a training step with a bad class index leaves the parameters and
    optimizer state as they were). `states[i][g]`: the storage's (array, logical form) at check i;
    `either` caches a run of checks' flags or-ed."""
    new = boxes[g].array
    runs: list = []  # [first, last, state]: consecutive checks that saw the same state share one select
    for i, state in enumerate(states):
        if runs and runs[-1][2][0] is state[g][0] and runs[-1][2][1] is state[g][1]:
            runs[-1][1] = i
        else:
            runs.append([i, i, state[g]])
    value = new
    for first, last, (array, logical) in reversed(runs):
        if array is new and logical is None:  # nothing written after these checks
            continue
        if (first, last) not in either:
            either[first, last] = functools.reduce(operator.or_, flags[first : last + 1])
        old = array if logical is None else transpose_program(logical[3])(logical[0])
        value = jnp.where(either[first, last], old.reshape(new.shape), value)
    return value
