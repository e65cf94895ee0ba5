"""The functional collectives inside a compiled program: one SPMD XLA program per graph and rank.

A graph captured from code that calls `torch.distributed._functional_collectives` (a DDP-style step
that all-reduces its gradients, DTensor's redistributions, FSDP2's all-gathers) holds nodes of
`torch.ops._c10d_functional` (`all_reduce`, `all_gather_into_tensor`, `reduce_scatter_tensor`, ...
each followed by `wait_tensor`). Where their process group takes the XLA route (jaxdev/parallel/distributed.py:
`jax.distributed` spans exactly the group's processes, in rank order), the graph's program becomes a
`shard_map` over the group's 1-D mesh, one device per process, axis "ranks": every rank runs the same
program on its own arrays, which enter as its block of global arrays (no copy), and the collectives
become XLA's (`psum`, `all_gather`, `psum_scatter`, `all_to_all`, ...) inside it; `wait_tensor` is the identity.
So a compiled step with collectives is one XLA program per rank, as without them.

Elsewhere (a gloo-route group, a group that is not the whole jax.distributed world, a mesh set with
`jaxdev.set_mesh`, a collective with no lowering here) the graph runs op by op, its collectives
eagerly, with one warning that says why. Every rank compiles the same graph: the same shapes on
every rank, as the collectives themselves need.
"""

from __future__ import annotations

import operator

import jax
import jax.numpy as jnp
import torch
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec

from jaxdev import tensor
from jaxdev.parallel import distributed, mesh
from jaxdev.tracing import UntraceableGraph

AXIS = "ranks"
_NAMESPACE = "_c10d_functional"
_ROUTE = (
    "its process group takes the gloo route (host copies: jax.distributed does not span exactly the "
    "group's processes, or JAXDEV_COLLECTIVES=gloo), so its collectives run eagerly"
)


def is_collective(target) -> bool:
    """A functional collective, or DTensor's Shard(i) -> Shard(j) all-to-all."""
    return isinstance(target, torch._ops.OpOverload) and (
        target.namespace == _NAMESPACE or target.name() == "_dtensor::shard_dim_alltoall"
    )


def _group_name(node: torch.fx.Node):
    names = [a.name for a in node.target._schema.arguments]
    if "group_name" not in names:
        return None
    i = names.index("group_name")
    return node.args[i] if i < len(node.args) else node.kwargs.get("group_name")


def _xla_route(node: torch.fx.Node):
    """The XLA collectives of the node's group, or UntraceableGraph saying why the graph runs eagerly."""
    from torch._C._distributed_c10d import _resolve_process_group

    name = _group_name(node)
    group = _resolve_process_group(name) if isinstance(name, str) else name
    if not hasattr(group, "_jax_collectives"):
        raise UntraceableGraph(node, "its process group is not of the 'jax' backend, so it runs eagerly")
    if group.via != "xla" or group.size() != jax.process_count():
        raise UntraceableGraph(node, _ROUTE)
    return group._xla


def plan(gm: torch.fx.GraphModule) -> Spmd | None:
    """The SPMD form of a graph with collectives (None: it has none); UntraceableGraph where it cannot have one."""
    xla = None
    for node in gm.graph.nodes:
        if node.op != "call_function" or not is_collective(node.target):
            continue
        if node.target._opname not in _LOWERINGS:
            raise UntraceableGraph(node, "this collective has no XLA lowering in jaxdev, so it runs eagerly")
        if node.target._opname != "wait_tensor":
            xla = _xla_route(node)
    if xla is None:
        return None
    if mesh.get_mesh() is not None:
        raise UntraceableGraph(None, "collectives of a process group under jaxdev.set_mesh's mesh run eagerly")
    _sink(gm)
    return Spmd(xla, gm)


def _mutates(n: torch.fx.Node) -> bool:
    """A node that may write a tensor (in-place or out= ops; unknown callables other than getitem)."""
    if n.op != "call_function" or n.target is operator.getitem:
        return False
    return not isinstance(n.target, torch._ops.OpOverload) or n.target._schema.is_mutable


def _sink(gm: torch.fx.GraphModule) -> None:
    """Move each bucketable collective, with its wait_tensor, down to just before the first node that
    uses its result, so that collectives whose inputs are made one by one (a backward's gradients)
    meet in one bucket. The graph's values are unchanged (dataflow order is kept); in XLA's program the
    order of the trace does not matter anyway."""
    moved = False
    for c in reversed(list(gm.graph.nodes)):
        if _bucket_key(c) is None:
            continue
        waits = [u for u in c.users if is_collective(u.target) and u.target._opname == "wait_tensor"]
        users = [u for u in c.users if u not in waits] + [u for w in waits for u in w.users]
        if not users:
            continue
        nodes = list(gm.graph.nodes)
        order = {n: i for i, n in enumerate(nodes)}
        first = min(users, key=order.__getitem__)
        if any(_mutates(n) for n in nodes[order[c] + 1 : order[first]]):
            continue  # an input written in between (an inference graph's copy_): stays where it reads
        if order[first] > order[c] + len(waits) + 1:
            first.prepend(c)
            for w in waits:
                first.prepend(w)
            moved = True
    if moved:
        gm.graph.lint()
        gm.recompile()


_BUCKETED = {  # op -> the reduce ops its buckets take (None: the op has none)
    "all_reduce": ("sum", "avg", "max", "min"),
    "all_gather_into_tensor": None,
    "reduce_scatter_tensor": ("sum", "avg"),
}


def _bucket_key(n: torch.fx.Node):
    """What a collective node's bucket is keyed by (op, reduce op, group, dtype), or None."""
    if n.op != "call_function" or not is_collective(n.target) or n.target._opname not in _BUCKETED or n.kwargs:
        return None
    ops = _BUCKETED[n.target._opname]
    val = n.args[0].meta.get("val") if isinstance(n.args[0], torch.fx.Node) else None
    reduce_op = n.args[1].lower() if ops is not None and isinstance(n.args[1], str) else None
    if not isinstance(val, torch.Tensor) or (ops is not None and reduce_op not in ops):
        return None
    return (n.target._opname, reduce_op, n.args[-1], val.dtype)


def _buckets(gm: torch.fx.GraphModule) -> dict:
    """Collectives that run as one, on their inputs concatenated (DDP's buckets): each collective over
    TCP costs its latency (~4 ms on this machine's gloo), whatever its size. A bucket, keyed by its first
    node, takes the later ones of the same kind (op, reduce op, group, dtype) whose inputs exist before it."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    buckets: dict = {}
    first_of: dict = {}
    for n in gm.graph.nodes:
        key = _bucket_key(n)
        if key is None:
            continue
        first = first_of.get(key)
        if first is not None and order[n.args[0]] < order[first]:
            buckets[first].append(n)
        else:
            first_of[key], buckets[n] = n, [n]
    return {first: members for first, members in buckets.items() if len(members) > 1}


def _bucketed(kind: str, reduce_op, xs: list, size: int) -> list:
    """The collective `kind` of each array in `xs`, as one collective of their concatenation."""
    if kind == "all_reduce":
        flat = _all_reduce_array(jnp.concatenate([x.reshape(-1) for x in xs]), reduce_op, size)
        rows = [flat]
    elif kind == "all_gather_into_tensor":  # (size, total): every rank's concatenation
        rows = lax.all_gather(jnp.concatenate([x.reshape(-1) for x in xs]), AXIS)
    else:  # reduce_scatter_tensor: each input as (size, n), joined along n; this rank keeps its row
        for x in xs:
            if x.shape[0] % size:
                raise RuntimeError(f"the input's first dim ({x.shape[0]}) is not divisible by the group size ({size})")
        joined = jnp.concatenate([x.reshape(size, -1) for x in xs], axis=1)
        flat = lax.psum_scatter(joined, AXIS, scatter_dimension=0, tiled=False)
        rows = [flat if reduce_op == "sum" else _avg(flat, size)]
    out, at = [], 0
    for x in xs:
        n = x.size // size if kind == "reduce_scatter_tensor" else x.size
        piece = rows[0][at : at + n] if kind != "all_gather_into_tensor" else rows[:, at : at + n]
        at += n
        if kind == "all_gather_into_tensor":
            out.append(piece.reshape(size * x.shape[0], *x.shape[1:]))
        elif kind == "reduce_scatter_tensor":
            out.append(piece.reshape(x.shape[0] // size, *x.shape[1:]))
        else:
            out.append(piece.reshape(x.shape))
    return out


class Spmd:
    """A traced program `fn(arrays, base) -> outputs` run as a shard_map over the group's 1-D mesh: each
    rank's arrays enter as its blocks of global arrays and its results leave as its blocks."""

    def __init__(self, xla, gm: torch.fx.GraphModule):
        self.device = xla.device
        self.size = xla.size
        self.sharding = NamedSharding(xla.stacked.mesh, PartitionSpec(AXIS))
        self.buckets = _buckets(gm)
        self.pending: dict = {}  # results of bucketed all-reduces not reached yet in this trace

    def lower(self, node: torch.fx.Node, args, kwargs, env: dict):
        """The node's collective on traced tensors, inside the program's shard_map (`env`: the
        interpreter's values of the nodes so far)."""
        if node in self.pending:
            return self.pending.pop(node)
        members = self.buckets.get(node)
        if members is None:
            return _LOWERINGS[node.target._opname](*args, **kwargs)
        kind, reduce_op = _bucket_key(node)[:2]
        if kind != "all_reduce":
            _size(args[1] if kind == "all_gather_into_tensor" else args[2])
        xs = [_array(args[0] if m is node else env[m.args[0]]) for m in members]
        for m, result in zip(members, _bucketed(kind, reduce_op, xs, self.size)):
            self.pending[m] = tensor.wrap(result)
        return self.pending.pop(node)

    def jit(self, fn):
        """`fn` as this mesh's program. Scalars travel as (1,) blocks (a block has a leading dim)."""
        scalars_in: list[bool] = []
        scalars_out: list[bool] = []

        def body(arrays, base):
            self.pending.clear()
            outs = fn([a.reshape(()) if s else a for a, s in zip(arrays, scalars_in)], base)
            leaves, tree = jax.tree.flatten(outs)
            scalars_out[:] = [jnp.ndim(x) == 0 for x in leaves]
            return jax.tree.unflatten(tree, [jnp.reshape(x, (1,)) if jnp.ndim(x) == 0 else x for x in leaves])

        spec = PartitionSpec(AXIS)
        program = jax.jit(jax.shard_map(body, mesh=self.sharding.mesh, in_specs=spec, out_specs=spec, check_vma=False))
        compiled: dict = {}

        def run(arrays, base):
            if not scalars_in:
                scalars_in[:] = [jnp.ndim(a) == 0 for a in arrays]
            outs = distributed.run_compiled(
                program, compiled, self._global(arrays), self._global([jnp.asarray(base)])[0]
            )
            leaves, tree = jax.tree.flatten(outs)
            local = [x.addressable_data(0) for x in leaves]
            return jax.tree.unflatten(tree, [x.reshape(()) if s else x for x, s in zip(local, scalars_out)])

        return run

    def _global(self, arrays) -> list:
        local = jax.device_put([a.reshape((1,)) if a.ndim == 0 else a for a in arrays], self.device)
        return [
            jax.make_array_from_single_device_arrays((self.size * a.shape[0], *a.shape[1:]), self.sharding, [a])
            for a in local
        ]


# --- the lowerings: traced jax tensors in, traced jax tensors out ----------------------------------


def _array(t: torch.Tensor):
    return tensor.read(t)


def _all_reduce_array(x, op: str, size: int):
    op = op.lower()
    if op == "sum":
        return lax.psum(x, AXIS)
    if op == "avg":
        return _avg(lax.psum(x, AXIS), size)
    if op == "max":
        return lax.pmax(x, AXIS)
    if op == "min":
        return lax.pmin(x, AXIS)
    if op == "product":
        return jnp.prod(lax.all_gather(x, AXIS), axis=0).astype(x.dtype)
    raise RuntimeError(f"the reduce op {op!r} has no XLA lowering")


def _size(group_size: int) -> int:
    size = lax.axis_size(AXIS)
    if group_size != size:
        raise RuntimeError(f"group_size {group_size} is not the group's size {size}")
    return size


def all_reduce(t, op, group_name):
    return tensor.wrap(_all_reduce_array(_array(t), op, lax.axis_size(AXIS)))


def all_reduce_coalesced(ts, op, group_name):
    return [all_reduce(t, op, group_name) for t in ts]


def all_gather_into_tensor(t, group_size, group_name):
    _size(group_size)
    return tensor.wrap(lax.all_gather(_array(t), AXIS, axis=0, tiled=True))


def all_gather_into_tensor_coalesced(ts, group_size, group_name):
    return [all_gather_into_tensor(t, group_size, group_name) for t in ts]


def reduce_scatter_tensor(t, op, group_size, group_name):
    size = _size(group_size)
    x = _array(t)
    if x.shape[0] % size:
        raise RuntimeError(f"the input's first dim ({x.shape[0]}) is not divisible by the group size ({size})")
    if op.lower() in ("sum", "avg"):
        out = lax.psum_scatter(x, AXIS, scatter_dimension=0, tiled=True)
        return tensor.wrap(out if op.lower() == "sum" else _avg(out, size))
    block = x.shape[0] // size
    reduced = _all_reduce_array(x, op, size)
    return tensor.wrap(lax.dynamic_slice_in_dim(reduced, lax.axis_index(AXIS) * block, block, 0))


def _avg(x, size):
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        raise RuntimeError("avg of an integer tensor has no XLA lowering")
    return x / jnp.asarray(size, x.dtype)


def reduce_scatter_tensor_coalesced(ts, op, group_size, group_name):
    return [reduce_scatter_tensor(t, op, group_size, group_name) for t in ts]


def broadcast(t, src, group_name):
    return tensor.wrap(lax.all_gather(_array(t), AXIS)[src])


def all_to_all_single(t, output_split_sizes, input_split_sizes, group_name):
    size = lax.axis_size(AXIS)
    even = [t.shape[0] // size] * size
    if t.shape[0] % size or any(s is not None and list(s) != even for s in (output_split_sizes, input_split_sizes)):
        raise RuntimeError("all_to_all_single with uneven splits has no XLA lowering")
    return tensor.wrap(lax.all_to_all(_array(t), AXIS, 0, 0, tiled=True))


def shard_dim_alltoall(t, gather_dim, shard_dim, group_name):
    """Rank r's block r along `shard_dim` of every rank's tensor, joined along `gather_dim`."""
    x = _array(t)
    if x.shape[shard_dim] % lax.axis_size(AXIS):
        raise RuntimeError("shard_dim_alltoall of a dim the group's size does not divide has no XLA lowering")
    return tensor.wrap(lax.all_to_all(x, AXIS, shard_dim, gather_dim, tiled=True))


def wait_tensor(t):
    return t  # the collective completed inside the program


_LOWERINGS = {
    f.__name__: f
    for f in (
        all_reduce,
        all_reduce_coalesced,
        all_gather_into_tensor,
        all_gather_into_tensor_coalesced,
        reduce_scatter_tensor,
        reduce_scatter_tensor_coalesced,
        broadcast,
        all_to_all_single,
        shard_dim_alltoall,
        wait_tensor,
    )
}
