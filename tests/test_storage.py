"""The storage model's bookkeeping: boxes of dead storages are released, aliases share one box."""

import torch

import jaxdev  # noqa: F401
from jaxdev import tensor


def test_dead_storages_release_their_arrays():
    for _ in range(200):
        torch.ones(512, 1024, device="jax")  # 2 MiB each, 400 MiB in all
    live_bytes = sum(b.array.nbytes for b in tensor.BOXES.values())
    assert live_bytes < 300 << 20, f"{live_bytes >> 20} MiB still held by dead storages"


def test_temporaries_are_released_within_a_few_megabytes():
    """A result that dies at once frees its array after a few MiB more were allocated (young boxes
    are swept every 4 MiB), not after 256 MiB: a loop that keeps nothing keeps no memory, and the
    next result can reuse the freed buffer."""
    x = torch.ones(256, 1024, device="jax")  # 1 MiB
    tensor._sweep()
    before = len(tensor.BOXES)
    for _ in range(64):
        x + 0
    assert len(tensor.BOXES) - before <= 10


def test_views_share_one_box_and_copies_do_not():
    x = torch.arange(6.0, device="jax").view(2, 3)
    assert tensor.box_of(x.t()) is tensor.box_of(x)
    assert tensor.box_of(x[1]) is tensor.box_of(x)
    assert tensor.box_of(x.detach()) is tensor.box_of(x)
    assert tensor.box_of(x.clone()) is not tensor.box_of(x)


def test_storage_reports_real_size_and_sharing():
    x = torch.zeros(4, 5, device="jax", dtype=torch.float64)
    assert x.untyped_storage().nbytes() == 4 * 5 * 8
    assert x[2:].untyped_storage().data_ptr() == x.untyped_storage().data_ptr()
    assert x[2:].storage_offset() == 10
    assert x.clone().untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
