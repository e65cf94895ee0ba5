"""The storage model's bookkeeping: boxes of dead storages are released, aliases share one box."""

import gc
import textwrap

import pytest
import torch
from jaxdev_testing import describe_exit, run_python

import jaxdev
from jaxdev import tensor

pytestmark = pytest.mark.filterwarnings("ignore:TypedStorage is deprecated")


def test_dead_storages_release_their_arrays():
    for _ in range(200):
        torch.ones(512, 1024, device="jax")  # 2 MiB each, 400 MiB in all
    # (fused eager never computes a result that died before its flush: its box, until swept, holds None)
    torch.jax.synchronize()
    live_bytes = sum(a.nbytes for b in list(tensor.BOXES.values()) if (a := b.array) is not None)
    assert live_bytes < 300 << 20, f"{live_bytes >> 20} MiB still held by dead storages"


def test_temporaries_are_released_within_a_few_megabytes():
    """A result that dies at once frees its array after a few MiB more were allocated (young boxes
    are swept every 4 MiB), not after 256 MiB: a loop that keeps nothing keeps no memory, and the
    next result can reuse the freed buffer."""
    x = torch.ones(256, 1024, device="jax")  # 1 MiB
    tensor.sweep()
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


# --- storages made, sliced, typed and resized on jax (issue 14: these crashed the process) ----------


def test_storage_constructors_on_jax_work_in_a_child_process():
    """Each of these segfaulted (PyTorch's C++ constructor has no allocator for a Python backend):
    run in a child so a regression fails the test instead of killing pytest."""
    proc = run_python(
        textwrap.dedent(
            """
            import warnings
            import torch, jaxdev
            warnings.simplefilter("ignore")
            s = torch.UntypedStorage(8, device="jax")
            assert (s.device.type, s.nbytes(), s.tolist()) == ("jax", 8, [0] * 8), s
            assert torch.UntypedStorage(device="jax").nbytes() == 0
            assert torch.UntypedStorage([1, 2, 300], device=torch.device("jax")).tolist() == [1, 2, 44]
            t = torch.TypedStorage(4, dtype=torch.float64, device="jax")
            assert (t.device.type, t.dtype, t.size(), t.tolist()) == ("jax", torch.float64, 4, [0.0] * 4)
            assert torch.TypedStorage([1.5, 2], dtype=torch.float32, device="jax").tolist() == [1.5, 2.0]
            assert torch.jax.FloatStorage(3).tolist() == [0.0] * 3
            assert torch.jax.LongStorage([5, 6]).tolist() == [5, 6]
            n = torch.arange(3.0, device="jax").untyped_storage().new()
            assert (n.device.type, n.nbytes()) == ("jax", 0)
            x = torch.arange(4.0, device="jax")
            x.untyped_storage().byteswap(torch.float32)
            y = torch.arange(4.0)
            y.untyped_storage().byteswap(torch.float32)
            assert torch.equal(x.cpu(), y)
            print("survived")
            """
        )
    )
    assert proc.returncode == 0 and "survived" in proc.stdout, describe_exit(proc)


def _both(fn):
    """fn(device) on CPU and jax: the same value, or the same exception type and message."""
    results = []
    for device in ("cpu", "jax"):
        try:
            results.append(("ok", fn(device)))
        except Exception as e:
            results.append(("raised", type(e), str(e)))
    assert results[0] == results[1], f"CPU: {results[0]!r}  jax: {results[1]!r}"
    return results[1]


@pytest.mark.parametrize(
    "fn",
    [
        lambda d: len(torch.UntypedStorage(5, device=d).tolist()),
        lambda d: torch.UntypedStorage([7, 8, 9], device=d).tolist(),
        lambda d: torch.UntypedStorage("ab", device=d),
        lambda d: torch.UntypedStorage(3, 4, device=d),
        lambda d: torch.arange(6.0, device=d).untyped_storage()[4:12].tolist(),
        lambda d: torch.arange(6.0, device=d).untyped_storage()[4:12].nbytes(),
        lambda d: torch.arange(6.0, device=d).untyped_storage()[::2],
        lambda d: torch.arange(6.0, device=d).untyped_storage()[30],
        lambda d: torch.arange(6.0, device=d).storage()[1:3],
        lambda d: torch.arange(6.0, device=d).untyped_storage().nbytes(),
        lambda d: torch.arange(6.0, device=d).untyped_storage().element_size(),
        lambda d: torch.arange(6.0, device=d).storage().element_size(),
        lambda d: torch.arange(6.0, device=d).storage().nbytes(),
        lambda d: torch.arange(6.0, device=d).storage().size(),
        lambda d: torch.arange(6.0, device=d).storage().tolist(),
        lambda d: torch.arange(6.0, device=d).untyped_storage().cpu().tolist(),
        lambda d: torch.arange(6.0, device=d).storage().cpu().tolist(),
        lambda d: torch.arange(6, device=d).storage().double().tolist(),
        lambda d: torch.arange(3.0, device=d).storage().type().rsplit(".", 1)[1],
        lambda d: torch.arange(3, device=d).storage_type().__name__,
        lambda d: torch.arange(3, device=d, dtype=torch.bool).storage_type().dtype,
        lambda d: torch.tensor([], device=d).untyped_storage().nbytes(),
        lambda d: torch.tensor([], device=d).untyped_storage().tolist(),
        lambda d: torch.tensor([], device=d).untyped_storage()[0:0].nbytes(),
        lambda d: torch.UntypedStorage(4, device=d).fill_(3).tolist(),
        lambda d: torch.UntypedStorage(4, device=d).copy_(torch.UntypedStorage([1, 2, 3, 4])).tolist(),
        lambda d: torch.UntypedStorage([1, 2]).copy_(torch.UntypedStorage([5, 6], device=d)).tolist(),
        lambda d: torch.UntypedStorage(4, device=d).copy_(torch.UntypedStorage(3)),
        lambda d: torch.arange(4.0, device=d).untyped_storage()._byteswap(3),
        lambda d: torch.arange(3.0, device=d).storage().fill_(7).tolist(),
    ],
)
def test_storage_operations_match_cpu(fn):
    _both(fn)


def test_storage_types_are_legacy_classes_like_cudas():
    s = torch.arange(3.0, device="jax").storage()
    assert torch.arange(3.0, device="jax").storage_type() is torch.jax.FloatStorage
    assert isinstance(s, torch.jax.FloatStorage) and not isinstance(s, torch.FloatStorage)
    assert torch.is_storage(torch.jax.BFloat16Storage(2))
    assert torch.jax.DoubleStorage(2).device.type == "jax"
    moved = torch.arange(3).storage().jax()
    assert (moved.device.type, moved.dtype, moved.tolist()) == ("jax", torch.int64, [0, 1, 2])


def test_a_storage_slice_aliases_its_storage_as_on_cuda():
    for d in ("cpu", "jax"):
        x = torch.arange(6.0, device=d)
        sl = x.untyped_storage()[4:12]
        u = torch.empty(0, device=d).set_(sl, 0, (2,), (1,))
        assert u.tolist() == [1.0, 2.0]
        u.fill_(5)  # a write through the slice reaches the storage
        assert x.tolist() == [0.0, 5.0, 5.0, 3.0, 4.0, 5.0]
        x.mul_(2)  # and a write to the storage reaches the slice
        assert u.tolist() == [10.0, 10.0]
        inner = sl[4:8]  # a slice of a slice
        assert torch.empty(0, device=d).set_(inner).tolist() == [10.0]
        x[1] = 3.14159
        half = x.untyped_storage()[2:6]  # not on an element boundary: the int16 halves of two floats
        assert torch.empty(0, dtype=torch.int16, device=d).set_(half).tolist() == [0, 4048]
        with pytest.raises(RuntimeError, match="not resizable"):
            sl.resize_(40)


def test_a_slice_of_a_pending_storage_outlives_it():
    """Fused eager: a slice of a storage whose value was pending kept reading the root's box, which the
    flush left unset once the root storage had died: torch.jax.synchronize() then raised."""
    with jaxdev.eager_mode("fused"):
        assert torch.arange(6.0, device="jax").untyped_storage()[4:12].nbytes() == 8
        gc.collect()
        torch.jax.synchronize()


@pytest.mark.parametrize("change", ["resize", "byteswap"])
def test_a_storage_changed_whole_after_fused_reads_of_it(change):
    """Fused eager: ops recorded before a storage's resize_ (FSDP2 frees an unsharded parameter with
    resize_(0)) or byteswap read what it held then. They ran at the next flush, on the new buffer
    (resize_(0): y was zeros; a later op's key then met the storage under an address it no longer had:
    KeyError in Segment.refresh)."""

    def run(d, fused):
        with jaxdev.eager_mode("fused" if fused else "op"):
            x = torch.arange(1.0, 5.0, device=d)
            torch.jax.synchronize()
            y = x * 2
            if change == "resize":
                x.untyped_storage().resize_(0)
            else:
                x.untyped_storage().byteswap(torch.float32)
            return y.cpu()

    want = run("cpu", False)
    assert torch.equal(run("jax", True), want) and torch.equal(run("jax", False), want)


def test_storage_resize_works_in_place_as_on_cuda():
    for d in ("cpu", "jax"):
        t = torch.arange(4.0, device=d)
        s = t.untyped_storage()
        s.resize_(24)
        assert t.untyped_storage().nbytes() == 24 and t.tolist() == [0.0, 1.0, 2.0, 3.0]
        assert torch.empty(0, device=d).set_(s, 0, (4,), (1,)).tolist() == [0.0, 1.0, 2.0, 3.0]
        s.resize_(8)
        assert torch.empty(0, device=d).set_(s).tolist() == [0.0, 1.0]
        s.resize_(0)
        assert s.nbytes() == 0
    grown = torch.tensor([], device="jax").untyped_storage().resize_(4)
    assert grown.tolist() == [0, 0, 0, 0]  # jax has no uninitialised memory: new bytes are zero
    gc.collect()
    tensor.sweep()  # the swapped-in box follows the storage that holds it
    assert grown.tolist() == [0, 0, 0, 0]


def test_storage_errors_are_one_sentence():
    with pytest.raises(RuntimeError, match="negative size -3"):
        torch.UntypedStorage(-3, device="jax")
    with pytest.raises(RuntimeError, match="jax:1"):
        torch.UntypedStorage(3, device="jax:1")
    with pytest.raises(torch.OutOfMemoryError, match="jax:0 is out of memory"):
        torch.UntypedStorage(2**62, device="jax")
    with pytest.raises(TypeError, match="only CPU memory can be pinned"):
        torch.UntypedStorage(4, device="jax").pin_memory()
