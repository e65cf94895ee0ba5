"""The jax-backed tensor and its aliasing model: strided storage.

Why this model (of three: strided storage, view chains, functionalization): PyTorch's own view semantics live in TensorImpl
metadata (sizes, strides, storage offset, a shared Storage). jaxdev keeps all of that real:

* Every jax tensor is a plain `torch.Tensor` with keys PrivateUse1/AutogradPrivateUse1 whose
  TensorImpl has true sizes, strides and storage offset, and a real (data-less) Storage of the right
  byte size. The storage's data pointer is a unique fake address, never dereferenced: it names the
  storage.
* The bytes live in a `Box`: one mutable holder of a jax.Array with the storage's elements in
  row-major order. `BOXES` maps a storage's fake address to its box.
* A view op (view, as_strided, select, transpose, expand, ...) therefore needs no JAX work at all:
  PyTorch's own CPU kernel for it only writes metadata and shares the storage, so jaxdev runs that
  kernel on the jax tensor (see ops/views.py). Strides, `is_contiguous()`, `_base`, "view size is not
  compatible" errors and `as_strided` are PyTorch's own, exactly.
* Reading a tensor gathers its elements from the box (nothing to do in the common case of a
  contiguous tensor that spans its storage); writing one scatters them back and replaces the box's
  array, so every alias (base, sibling views, views of views) sees the write.
* In-place ops are registered as such, so ADInplaceOrView bumps version counters and autograd still
  raises "modified by an inplace operation".

The alternatives were rejected for this reason: view chains (2) replay view ops in Python and cannot
express `as_strided` or strides; functionalization (3) only stops at XLA/Lazy devices in `_to_copy`
and hands users wrapper tensors.

This module is the public surface; the model lives in jaxdev/core/, one concern a module:

    core/boxes.py      Box, BOXES and their lifetime (sweeps), new storages and tensors, exported arrays
    core/strided.py    read and write through strides, read_parts/view_reader, donation (sole_holder)
    core/plans.py      a view as slices of the flat storage (Plan, access_mode), byte reinterpretation
    core/placement.py  JAX's device, host placement, storages sharded over a mesh and mesh.py's hooks
    core/limits.py     overflowing layouts, overlapping writes, out-of-memory as torch's error

Placement hooks change through `placement.set_host_placement` / `set_view_sharding`, never by assigning
a global (`tensor.HOST_PLACEMENT` still reads the live value, through the module's __getattr__).
"""

from jaxdev.core import placement
from jaxdev.core.boxes import (
    BOXES,
    DEVICE,
    EXPORTED,
    Box,
    alias,
    box_of,
    contiguous_strides,
    empty,
    export,
    in_scratch,
    is_exported,
    is_jax,
    mixed_devices,
    new_storage,
    reattach,
    scratch,
    span,
    storage_address,
    strides_for,
    sweep,
    tensor_on_storage,
    wrap,
    zeros,
)
from jaxdev.core.limits import (
    check_layout,
    check_no_partial_overlap,
    contiguous_strides_overflow,
    is_non_overlapping_and_dense,
    numel_overflows,
    out_of_memory_as_torch,
    raise_if_out_of_memory,
    storage_nbytes_overflows,
    xla_extent_overflows,
)
from jaxdev.core.placement import SHARDED, SHARDED_ENTRIES, from_cpu, jax_device, keep_sharding, to_cpu
from jaxdev.core.plans import (
    GRID,
    PADDED,
    SLICED,
    WHOLE,
    bitcast_flat,
    dense_permutation,
    to_bytes,
    transpose_program,
    view_value,
)
from jaxdev.core.strided import (
    offset_arg,
    plain_array,
    read,
    read_parts,
    sole_holder,
    sole_holders,
    spans,
    view_reader,
    view_recipe,
    wrap_strided,
    write,
)

__all__ = [
    "BOXES",
    "DEVICE",
    "EXPORTED",
    "GRID",
    "PADDED",
    "SHARDED",
    "SHARDED_ENTRIES",
    "SLICED",
    "WHOLE",
    "Box",
    "alias",
    "bitcast_flat",
    "box_of",
    "check_layout",
    "check_no_partial_overlap",
    "contiguous_strides",
    "contiguous_strides_overflow",
    "dense_permutation",
    "empty",
    "export",
    "from_cpu",
    "in_scratch",
    "is_exported",
    "is_jax",
    "is_non_overlapping_and_dense",
    "jax_device",
    "keep_sharding",
    "mixed_devices",
    "new_storage",
    "numel_overflows",
    "offset_arg",
    "out_of_memory_as_torch",
    "plain_array",
    "raise_if_out_of_memory",
    "read",
    "read_parts",
    "reattach",
    "scratch",
    "sole_holder",
    "sole_holders",
    "span",
    "spans",
    "storage_address",
    "storage_nbytes_overflows",
    "strides_for",
    "sweep",
    "tensor_on_storage",
    "to_bytes",
    "to_cpu",
    "transpose_program",
    "view_reader",
    "view_recipe",
    "view_value",
    "wrap",
    "wrap_strided",
    "write",
    "xla_extent_overflows",
    "zeros",
]


def __getattr__(name: str):
    """`tensor.HOST_PLACEMENT` reads placement.host_placement() live (set it with set_host_placement)."""
    if name == "HOST_PLACEMENT":
        return placement.host_placement()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
