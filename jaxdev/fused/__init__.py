"""Fused eager mode: PyTorch eager code recorded op by op and run as few cached XLA programs.

With `jaxdev.eager_mode("fused")` (or JAXDEV_EAGER=fused) a kernel call on jax tensors is not run: it
is recorded, and its results are tensors with real sizes, strides and storages whose values are
pending (`boxes.PendingBox`). The pending ops run as one jitted program when a value must exist:
anything that reads a pending storage (a host read, printing, `.item()`, an op that cannot be recorded,
the CPU fallback), `torch.jax.synchronize()`, the end of `optimizer.step()`, a change of the random
state, or a size bound. The program is the recorded ops replayed through the very same kernels over
tracers (`jaxdev/graphs/program.py`'s machinery, as `torch.compile(backend="jax")` runs them).

Recording must not run the kernel, yet must return results with PyTorch's exact metadata and raise
a wrong call's error at the call. Both come from a trie of what was seen (`recorder`): each op is
keyed by its overload, its arguments' dtypes, sizes, strides, offsets, which storage each reads
(inputs by first appearance, pending ones by the op that made them) and its other arguments with
their types (a zero or NaN float by its bits, where == cannot tell: `number_keys`; a view of an
input storage whose offset moved since an earlier segment, a decoding loop's cache position, is
keyed without it: the offset is program data, `offsets`). The first time an
op is met at a place in the trie, its kernel is evaluated abstractly (`learn`: jax.eval_shape over
tracer-backed tensors), which runs every shape, dtype and argument
check and gives the results' layout; an op that cannot be evaluated so (it needs values, returns a
Python number or a CPU tensor, replaces an argument's storage) is marked to run eagerly, after the
pending work. Later calls with the same key reuse what was learned, so a training loop records each
op for the cost of building its key, and each flush point of the loop holds one compiled program per
set of results still alive.
"""
