"""narrow with a 0-dim tensor `start` on jax: eagerly a view as CPU's; under torch.compile a PyTorch
limitation that jaxdev cannot avoid (the auditor's `narrow` compile cell is `exception` for it).

Dynamo's fake propagation of `torch.narrow(x, dim, start, length)` runs narrow.Tensor's
CompositeImplicitAutograd decomposition: `start.item()` gives an unbacked SymInt u0, and the fake
`aten.slice` (torch/_subclasses/fake_impls.py `slice_forward`) cannot place an unbacked start
(`_compute_slice_index` returns None), so it makes a fresh unbacked storage offset instead of an
expression in u0; u0 is then bound by no output and dynamo's compute_unbacked_bindings raises
PendingUnbackedSymbolNotFound. CPU escapes only for a CPU 0-dim graph input: FakeTensorConverter
(torch/_subclasses/fake_tensor.py, from_real_tensor) reads such a tensor's value into a backed symbol
when `t.device.type == "cpu"`; a start computed inside the graph fails on CPU exactly as on jax."""

from __future__ import annotations

import pytest
import torch

import jaxdev  # noqa: F401  (registers the device)

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


@pytest.mark.parametrize(("dim", "start", "length"), [(1, 2, 2), (-1, 0, 0), (2, -3, 2), (0, 4, 1)])
def test_eager_narrow_with_a_jax_tensor_start_is_cpus_view(dim, start, length):
    x = torch.randn(5, 5, 5)
    d = x.to("jax")
    got = torch.narrow(d, dim, torch.tensor(start, device="jax"), length)
    want = torch.narrow(x, dim, torch.tensor(start), length)
    assert (got.shape, got.stride(), got.storage_offset()) == (want.shape, want.stride(), want.storage_offset())
    assert got.untyped_storage().data_ptr() == d.untyped_storage().data_ptr()  # a view, as on CPU
    assert torch.equal(got.cpu(), want)


def _pending_unbacked(fn, *args) -> str:
    torch._dynamo.reset()
    try:
        torch.compile(fn, backend="aot_eager", fullgraph=True)(*args)
    except Exception as e:  # dynamo wraps it in InternalTorchDynamoError
        return str(e)
    finally:
        torch._dynamo.reset()
    return ""


def test_compiled_narrow_with_a_device_tensor_start_is_pytorchs_limitation():
    x = torch.randn(5, 5, 5)
    # jax graph input: no backed value for start.item()
    on_jax = _pending_unbacked(lambda t, s: torch.narrow(t, 1, s, 2), x.to("jax"), torch.tensor(1, device="jax"))
    # CPU, start computed in the graph: the same unbacked start, the same failure
    on_cpu = _pending_unbacked(lambda t, s: torch.narrow(t, 1, s + 0, 2), x, torch.tensor(1))
    for text in (on_jax, on_cpu):
        assert "PendingUnbackedSymbolNotFound" in text, text
    # a CPU graph input has its value read at compile time and compiles
    assert _pending_unbacked(lambda t, s: torch.narrow(t, 1, s, 2), x, torch.tensor(1)) == ""
