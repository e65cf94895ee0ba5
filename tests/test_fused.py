"""Fused eager mode (jaxdev/fused): recorded ops run as cached programs, with per-op mode's results."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import jax
import pytest
import torch
from torch import nn

import jaxdev
from jaxdev.fused import recorder
from jaxdev.fused.program import FusedGraphWarning

STATS = recorder.STATS


pytestmark = pytest.mark.usefixtures("per_op_after")


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 5))


def _train(mode: str, optimizer, steps: int = 16):
    model = _mlp().to("jax")
    torch.manual_seed(1)
    x, y = torch.randn(8, 12).to("jax"), torch.randint(0, 5, (8,)).to("jax")
    opt = optimizer(model.parameters())
    losses = []
    programs = []  # programs built before each step
    with jaxdev.eager_mode(mode):
        for _ in range(steps):
            programs.append(STATS.programs)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    programs.append(STATS.programs)
    return losses, [p.detach().cpu() for p in model.parameters()], programs


@pytest.mark.parametrize(
    "optimizer",
    [
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
        lambda ps: torch.optim.Adam(ps, lr=0.01),
        lambda ps: torch.optim.AdamW(ps, lr=0.01, foreach=False),
    ],
    ids=["sgd", "adam", "adamw-single-tensor"],
)
def test_training_matches_per_op_mode(optimizer):
    """Dropout included: fused programs draw what per-op dropout draws for the same seed."""
    losses, weights, _ = _train("op", optimizer)
    STATS.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.simplefilter("error", FusedGraphWarning)  # every segment ran as one program
        fused_losses, fused_weights, programs = _train("fused", optimizer)
    assert fused_losses == pytest.approx(losses, rel=1e-6, abs=1e-7)
    for a, b in zip(weights, fused_weights):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    # forward, backward and the optimizer were recorded, not run op by op: what ran eagerly is the loss's
    # .item() (and copies from CPU: under JAXDEV_EAGER=fused the model moves to jax in fused mode too);
    # the step sizes, single-tensor AdamW's too, are program inputs (registry.DYNAMIC_NUMBERS)
    assert STATS.recorded > 15 * 16
    eager = {name for name, _ in STATS.eager}
    assert eager <= {"aten::_local_scalar_dense", "aten::_to_copy"}, STATS.eager
    assert programs[-1] == programs[-3]  # steady state: the last two steps replayed cached programs


def test_results_are_pending_until_read():
    x = torch.randn(4, 8, device="jax")
    with jaxdev.eager_mode("fused"):
        y = (x * 2 + 1).relu()
        z = y.t().sum(1)
        assert recorder.pending_ops() >= 3
        got = z.cpu()  # a host read flushes
        assert recorder.pending_ops() == 0
    torch.testing.assert_close(got, (x.cpu() * 2 + 1).relu().t().sum(1))


def test_aliasing_views_and_in_place_writes():
    base = torch.arange(24.0, device="jax").reshape(4, 6)
    expected = base.cpu().clone()
    with jaxdev.eager_mode("fused"):
        view = base[:, 1:4]
        view.mul_(10)  # writes through a view into an existing storage
        row = base[2]
        row.add_(1)
        t = base.t().contiguous()
        s = t[3:].sum()
        version = base._version
    expected[:, 1:4] *= 10
    expected[2] += 1
    assert version > 0
    torch.testing.assert_close(base.cpu(), expected)
    torch.testing.assert_close(t.cpu(), expected.t())
    torch.testing.assert_close(s.cpu(), expected.t()[3:].sum())


def test_autograd_errors_still_raise_at_the_call():
    a = torch.randn(3, device="jax", requires_grad=True)
    with jaxdev.eager_mode("fused"):
        b = a.sigmoid()
        b.mul_(2)  # sigmoid saved its result: backward must refuse, as eagerly
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            b.sum().backward()


def test_shape_errors_raise_at_the_call():
    with jaxdev.eager_mode("fused"):
        a, b = torch.ones(2, 3, device="jax"), torch.ones(4, 5, device="jax")
        with pytest.raises(RuntimeError) as fused_error:
            a @ b
    with pytest.raises(RuntimeError) as eager_error:
        a.cpu() @ b.cpu()
    assert str(fused_error.value) == str(eager_error.value)


def test_value_errors_surface_at_the_next_sync():
    """Like CUDA's asynchronous errors: an index out of range is found when values are read."""
    weights = torch.randn(5, 3, device="jax")
    with jaxdev.eager_mode("fused"):
        out = nn.functional.embedding(torch.tensor([1, 7], device="jax"), weights)
        with pytest.raises((IndexError, RuntimeError)):
            out.cpu()
            torch.jax.synchronize()


def test_values_needed_mid_segment_flush_it():
    x = torch.tensor([3.0, -1.0, 2.0, -5.0], device="jax")
    with jaxdev.eager_mode("fused"):
        y = x * 2
        positives = y[y > 0]  # a data-dependent shape: runs after the pending work
        total = positives.sum().item()
    assert total == 10.0


def test_dead_intermediates_are_not_outputs():
    x = torch.randn(64, 64, device="jax")
    with jaxdev.eager_mode("fused"):
        for _ in range(2):
            y = ((x + 1) * 2).exp().sum()  # three intermediates die before the flush
            y.cpu()
    program = next(iter(recorder.ROOT.children.values()))
    assert program is not None
    assert y.cpu().numel() == 1


def test_ops_under_inference_mode_are_recorded():
    """Under torch.inference_mode() (a model's generate, a serving loop) ops are recorded and replay one
    program, their results inference tensors as on CPU. Learning an op made its twins in inference mode,
    whose versions cannot be read: every op ran eagerly, one program each."""
    w = torch.randn(8, 8, device="jax")  # a parameter made outside inference mode

    def step(x):
        h = torch.tanh(x @ w + 1.5)
        h.mul_(2).add_(x)
        torch._foreach_mul_([h, x], 0.5)
        return h[:, :4].sum(1)

    with torch.inference_mode():
        xs = [torch.randn(4, 8, device="jax") for _ in range(3)]
        with jaxdev.eager_mode("op"):
            want = [step(x.clone()).cpu() for x in xs]
        eager, built = dict(STATS.eager), []
        with jaxdev.eager_mode("fused"):
            for x in xs:
                before = STATS.programs
                got = step(x.clone())
                assert got.is_inference()
                built.append(STATS.programs - before)
                torch.testing.assert_close(got.cpu(), want[len(built) - 1])
    new = {k: n - eager.get(k, 0) for k, n in STATS.eager.items() if n != eager.get(k, 0)}
    assert [k for k in new if k[0] != "aten::_to_copy"] == [], new  # (the host read runs eagerly)
    assert built[2] == 0, built


def test_mode_api_and_environment():
    start = jaxdev.get_eager_mode()
    assert start == os.environ.get("JAXDEV_EAGER", "op")
    with jaxdev.eager_mode("sync"):
        assert jaxdev.get_eager_mode() == "sync"
        assert torch.ones(2, device="jax").add(1).cpu().tolist() == [2.0, 2.0]
    assert jaxdev.get_eager_mode() == start
    with pytest.raises(ValueError, match="must be one of op, fused, sync"):
        jaxdev.eager_mode("lazy")
    code = "import torch, jaxdev; print(jaxdev.get_eager_mode(), torch.ones(2, device='jax').sum().item())"
    env = dict(os.environ, JAXDEV_EAGER="fused")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["fused", "2.0"], out.stderr


def test_the_platforms_default_mode_starts_at_the_first_tensor():
    """Fused eager is the default on an accelerator, chosen at the device's first tensor (torch's
    lazy device init) unless JAXDEV_EAGER or eager_mode() chose first; per-op on XLA's CPU backend.
    The child pretends to be on an accelerator by its platform_default, the one platform question."""
    code = """
import sys, torch, jaxdev
from jaxdev import eager_modes
eager_modes.platform_default = lambda: "fused"  # an accelerator's
if sys.argv[1] == "chosen":
    jaxdev.eager_mode("op")
before = jaxdev.get_eager_mode()
x = torch.ones(2).to("jax")
print(before, jaxdev.get_eager_mode(), x.sum().item())
"""
    env = {k: v for k, v in os.environ.items() if k != "JAXDEV_EAGER"}
    runs = {
        "free": env,
        "chosen": env,
        "env": dict(env, JAXDEV_EAGER="op"),
    }
    seen = {}
    for how, child_env in runs.items():
        out = subprocess.run(
            [sys.executable, "-c", code, how], env=child_env, capture_output=True, text=True, timeout=300
        )
        seen[how] = out.stdout.split() or out.stderr[-500:]
    assert seen == {"free": ["op", "fused", "2.0"], "chosen": ["op", "op", "2.0"], "env": ["op", "op", "2.0"]}
    if jax.default_backend() == "cpu":
        assert jaxdev.eager_modes.platform_default() == "op"


def test_changing_numbers_compile_a_bounded_number_of_programs():
    x = torch.randn(16, device="jax")
    with jaxdev.eager_mode("fused"), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        before = STATS.programs
        for step in range(12):
            # a number that changes every time, which clamp's kernel reads in Python (add's would be
            # program data: tests/test_fused_numbers.py)
            y = (x * 2).clamp(max=step * 0.5).sin()
            y.cpu()
    assert STATS.programs - before <= recorder.MAX_BRANCHES + 3
    assert any("runs op by op" in str(w.message) for w in seen)
    torch.testing.assert_close(y.cpu(), (x.cpu() * 2).clamp(max=11 * 0.5).sin())


def test_a_compiled_function_inside_fused_mode():
    """A torch.compile(backend="jax") graph called on pending tensors joins their segment as one op
    (tests/test_fused_compiled.py has more)."""
    x = torch.randn(8, 8, device="jax")
    f = torch.compile(lambda a: (a @ a).relu().sum(0), backend="jax")
    expected = (f(x) + 1).cpu()
    with jaxdev.eager_mode("fused"):
        z = f(x * 1.0) + 1
        torch.testing.assert_close(z.cpu(), expected)


def test_host_to_device_copies_do_not_cut_the_segment():
    """`torch.tensor(..., device="jax")` and `cpu_tensor.to("jax")` copy at once (a later change of the
    host tensor is not seen) without running the pending ops, so a decoding loop stays one segment."""
    x = torch.randn(6, device="jax")
    host = torch.arange(6.0)
    with jaxdev.eager_mode("fused"):
        before = STATS.flushes
        y = x * 2
        position = torch.tensor([3], device="jax")
        moved = host.to("jax")
        host.add_(100)  # after the copy: not seen
        z = y.index_select(0, position) + moved[position]
        assert STATS.flushes == before and recorder.pending_ops() >= 3
        assert STATS.uploads >= 2
        got = z.cpu()
    torch.testing.assert_close(got, x.cpu()[3:4] * 2 + 3.0)


def test_integer_indexing_is_recorded_and_masks_are_not():
    """`x[idx]` with integer indices has a size known from shapes (recorded; a bad index raises CPU's
    error at the read); with a boolean mask its size depends on values (run at once, after a flush)."""
    x = torch.randn(5, 3, device="jax")
    with jaxdev.eager_mode("fused"):
        before = STATS.flushes
        rows = (x + 1)[torch.tensor([4, 0], device="jax")]
        assert STATS.flushes == before
        torch.testing.assert_close(rows.cpu(), x.cpu()[[4, 0]] + 1)
        bad = x[torch.tensor([7], device="jax")]
        with pytest.raises(IndexError, match="out of bounds"):
            bad.cpu()
        masked = (x * 2)[x > 0]
        torch.testing.assert_close(masked.cpu(), (x.cpu() * 2)[x.cpu() > 0])


@pytest.fixture
def fresh_recorder(monkeypatch):
    """A recorder with nothing learned: earlier tests' calls (scalar_tensor met with many numbers) teach
    the storm guard to run such ops eagerly at new places, which would cut these loops elsewhere."""
    monkeypatch.setattr(recorder, "ROOT", recorder.Trie())
    monkeypatch.setattr(recorder, "_CHANGING", set())
    monkeypatch.setattr(recorder, "_VARIANTS", {})
    recorder.flush()  # the next segment starts at the fresh root


def _write_at_positions(device: str, positions: int = 8) -> tuple[list, list]:
    """A preallocated cache written at position t (slice assign and `x[0, t, 1] = 5.0`) and read back
    with narrow at t, each step read on the host (fused mode); the programs built before each step."""
    src = torch.arange(positions * 6.0).reshape(positions, 2, 3).to(device)
    cache = torch.zeros(2, positions + 1, 3, device=device)
    torch.jax.synchronize()  # made before the loop (under JAXDEV_EAGER=fused too)
    out, built = [], []
    with jaxdev.eager_mode("fused"):
        for t in range(positions):
            built.append(STATS.programs)
            cache[:, t] = src[t] * 2
            cache[0, t, 1] = 5.0
            out.append((cache.narrow(1, t, 2) + 1).cpu())
        built.append(STATS.programs)
        with pytest.raises(IndexError, match="out of bounds for dimension 1"):  # bounds: checked at the call, as on CPU
            cache[:, positions + 1] = 1.0
    return out, built


def test_writes_at_a_moving_position_replay_one_program(fresh_recorder):
    """The offset of a view into an input storage (a slice's or select's start: a decoding loop's
    cache position) is program data once it moved (jaxdev/fused/offsets.py): 8 positions build the
    first position's program and the moving one (donating from its first call: flush's _trace_first),
    not one per position; values exactly CPU's."""
    expected, _ = _write_at_positions("cpu")
    got, built = _write_at_positions("jax")
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=0, atol=0)
    assert built[-1] - built[0] <= 2, built
    assert built[-1] == built[2], built  # from the third position on, nothing new is compiled


def _decode_like(device: str, steps: int = 6) -> tuple[list, int, int]:
    """A decoding loop's shape in fused mode: a position uploaded each step, the cache written there,
    nothing read until the end; its values, and the programs built and run (flushes)."""
    x = torch.arange(4.0).to(device)
    cache, mask = torch.zeros(steps, 4, device=device), torch.zeros(steps, dtype=torch.bool, device=device)
    torch.jax.synchronize()
    built, flushes, out = STATS.programs, STATS.flushes, []
    with jaxdev.eager_mode("fused"):
        for t in range(steps):
            position = torch.tensor([t], device=device)
            mask[t] = True
            cache.index_copy_(0, position, (x + 1).unsqueeze(0))
            x = torch.where(mask[:, None], cache, 0.0).sum(0)
            out.append(x)
        values = [v.cpu() for v in out]
    return values, STATS.programs - built, STATS.flushes - flushes


def test_a_loop_that_uploads_its_position_runs_one_program_per_step(fresh_recorder):
    """The same host-to-device copy again, with ops since, starts the loop's next step: each step is one
    program the next steps replay (the mask write's offset is program data), not the loop unrolled."""
    expected, _, _ = _decode_like("cpu")
    got, built, flushes = _decode_like("jax")
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=0, atol=0)
    assert flushes == 6 and built <= 3, (built, flushes)


def test_an_optimizer_step_compiles_once(fresh_recorder):
    """A program that overwrites its inputs and has no value checks donates them from its first call:
    AdamW's step (foreach) builds one program, where it built the plain one at step 0 and its donating
    twin at step 1 (on a TPU 25.7 s and then 23.5 s more, for 100 tensors)."""

    def steps(mode: str) -> tuple[list, list]:
        torch.manual_seed(0)
        params = [torch.nn.Parameter(torch.randn(s).to("jax")) for s in [(16, 8), (8,), (4, 4)]]
        for p in params:
            p.grad = torch.randn(p.shape).to("jax")
        opt = torch.optim.AdamW(params, lr=0.1, foreach=True)
        built = []
        with jaxdev.eager_mode(mode):
            for _ in range(3):
                opt.step()
                torch.jax.synchronize()
                built.append(STATS.programs)
        return [p.detach().cpu() for p in params], built

    expected, _ = steps("op")
    got, built = steps("fused")
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)  # a fused program's last bits (README: fused eager)
    assert built[0] == built[-1], built


def test_out_of_memory_at_the_flush_is_torchs_error():
    """A program that cannot allocate raises torch.OutOfMemoryError at the sync, as per-op mode raises it
    at the op (training tools catch it to shrink a batch); it raised XLA's JaxRuntimeError. Later syncs
    do not raise it again, and the device goes on working."""
    with jaxdev.eager_mode("fused"):
        t = torch.empty(2**40, dtype=torch.uint8, device="jax")  # 1 TiB, allocated by the flush
        with pytest.raises(torch.OutOfMemoryError, match="jax:0 is out of memory"):
            torch.jax.synchronize()
        torch.jax.synchronize()  # the failure was raised: t, still alive, has nothing to wait for (it raised again)
        with pytest.raises(RuntimeError, match="never computed because an earlier op failed"):
            t.cpu()
        del t
        assert (torch.ones(3, device="jax") + 1).cpu().tolist() == [2, 2, 2]


def test_an_allocation_that_fails_as_the_program_runs_raises_once():
    """XLA's CPU runtime reports this one when the program runs (the flush returned): the sync raised
    XLA's error, and again at every later sync while the tensor lived; now torch's error, once."""
    with jaxdev.eager_mode("fused"):
        x = torch.arange(0, 2**50, 0.25, device="jax")  # 16 PiB of float32
        with pytest.raises(torch.OutOfMemoryError, match="jax:0 is out of memory"):
            torch.jax.synchronize()
        torch.jax.synchronize()
        with pytest.raises(RuntimeError, match="never computed because an earlier op failed"):
            x.cpu()
        del x
        assert (torch.ones(3, device="jax") * 2).cpu().tolist() == [2, 2, 2]


def test_a_host_read_counts_as_eager_for_reading_values():
    """A copy to the CPU runs eagerly once the segment is flushed: fused eager's counts say it reads values on
    the host (they had said only the JAX error its abstract evaluation raised, TracerArrayConversionError)."""
    STATS.reset()
    with jaxdev.eager_mode("fused"):
        x = torch.randn(4, device="jax")
        (x * 2).cpu()
    reasons = {reason for (name, reason) in STATS.eager if name == "aten::_to_copy"}
    assert reasons and all(r.startswith("it reads values on the host") for r in reasons), STATS.eager
