"""Fused eager's replay (jaxdev/fused/replay.py): an op the trie expects is guarded, not keyed, and
leaves the segment exactly as keying it would."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import jaxdev
from jaxdev.fused import boxes, recorder, replay

STATS = recorder.STATS
pytestmark = [
    pytest.mark.skipif(replay._match is None, reason="replay needs jaxdev's native module"),
    pytest.mark.usefixtures("per_op_after"),
]


class Tied(nn.Module):
    """A head tied to the embedding (its gradient is summed from two ops), LayerNorm, GELU with a
    keyword argument, a transposed weight."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(16, 8)
        self.norm = nn.LayerNorm(8)
        self.up = nn.Linear(8, 12)

    def forward(self, tokens):
        h = nn.functional.gelu(self.up(self.norm(self.emb(tokens))), approximate="tanh")
        return h[..., :8] @ self.emb.weight.t()


def _setup(foreach: bool = True):
    torch.manual_seed(0)
    model = Tied().to("jax")
    tokens = torch.randint(0, 16, (2, 5)).to("jax")
    # lifted step sizes: a ScalarList (foreach), or each op's number and keywords (addcdiv_'s value=)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01, foreach=foreach)

    def record_step():
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.cross_entropy(model(tokens).reshape(-1, 16), tokens.reshape(-1))
        loss.backward()
        return loss

    return model, opt, record_step


def _state(seg) -> tuple:
    """The segment as the program is built from it (inputs by their storages: a view is a new tensor
    every step)."""
    return (
        [(node[0], id(node[3])) for node in seg.nodes],
        [t.untyped_storage().data_ptr() for t in seg.inputs],
        [meta for _, meta in seg.input_metas],
        list(seg.numbers),
        sorted(map(str, seg.slots.values())),
        seg.stored,
        id(seg.trie),
    )


def _segment_of(opt, record_step) -> tuple:
    """_state of a whole step's segment (forward, backward, the optimizer's ops), just before the flush
    that ends optimizer.step() (a global hook, run after the optimizer's own)."""
    seen = []
    handle = opt.register_step_post_hook(lambda *_: seen.append(_state(recorder._segment)))
    record_step()
    opt.step()
    handle.remove()
    return seen[0]


# the guard reading each key compiled once (jaxdev/csrc/fused_guard.cpp), or its tuples: the same answers
READERS = pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "tuples"])


@READERS
@pytest.mark.parametrize("foreach", [True, False], ids=["foreach", "single-tensor"])
def test_replayed_segment_is_the_keyed_one(monkeypatch, foreach, compiled):
    """Forward, backward and AdamW's step (its lifted numbers in the same order: the native guard walks
    positions, then keywords)."""
    monkeypatch.setattr(replay, "compiled", compiled)
    _, opt, record_step = _setup(foreach)
    with jaxdev.eager_mode("fused"):
        for _ in range(3):
            record_step()
            opt.step()
        STATS.reset()
        steps = [state["step"].clone() for state in opt.state.values()]  # CPU counts: not recorded
        replayed = _segment_of(opt, record_step)
        assert STATS.replayed == STATS.recorded > 10
        monkeypatch.setattr(replay, "_match", None)  # every op keyed, as without the native module
        STATS.reset()
        for state, step in zip(opt.state.values(), steps):  # the same step again: the same step sizes
            state["step"].copy_(step)
        keyed = _segment_of(opt, record_step)
        assert STATS.replayed == 0 and STATS.recorded > 10
    assert replayed[1:-1] == keyed[1:-1]  # inputs, their layouts, numbers, slots: the same
    assert replayed[0] == keyed[0] and replayed[-1] == keyed[-1]  # the same ops, learned, trie place


def test_training_replays_one_program():
    """Every step after the first replays the trie (no op keyed) and the program learned at step 2:
    autograd sums the tied gradient as it did when it was learned (replaying makes no Python storage
    object: boxes.address), so no new program comes after it."""
    _, opt, record_step = _setup()
    losses, programs = [], []
    with jaxdev.eager_mode("fused"):
        for _ in range(6):
            programs.append(STATS.programs)
            before = STATS.recorded - STATS.replayed
            losses.append(record_step())
            opt.step()
            keyed = STATS.recorded - STATS.replayed - before
    assert programs[2:] == [programs[2]] * 4
    assert keyed == 0
    per_op = _per_op_losses()
    torch.testing.assert_close(torch.stack(losses).cpu(), per_op, rtol=1e-5, atol=1e-6)


def _per_op_losses() -> torch.Tensor:
    _, opt, record_step = _setup()
    losses = []
    for _ in range(6):
        losses.append(record_step())
        opt.step()
    return torch.stack(losses).cpu()


def test_a_changed_call_takes_the_key():
    """The same op with other sizes, another storage layout, other numbers or another keyword at an
    expected place is keyed, and gives its own results."""
    x = torch.randn(4, 6).to("jax")
    with jaxdev.eager_mode("fused"):
        for _ in range(2):
            y = (x * 2).sum(0)
            recorder.flush()
        STATS.reset()
        variants = [
            lambda: (x * 3).sum(0),  # another number
            lambda: (x.t() * 2).sum(0),  # a transposed view
            lambda: (x[:2] * 2).sum(0),  # other sizes
            lambda: (x * 2).sum(1),  # another dim
            lambda: (x * 2).sum(0, keepdim=True),
        ]
        got = [v() for v in variants]
        keyed = STATS.recorded - STATS.replayed
        again = (x * 2).sum(0)
    cpu = x.cpu()
    expected = [(cpu * 3).sum(0), (cpu.t() * 2).sum(0), (cpu[:2] * 2).sum(0), (cpu * 2).sum(1), (cpu * 2).sum(0, True)]
    for g, e in zip(got, expected):
        torch.testing.assert_close(g.cpu(), e)
    torch.testing.assert_close(again.cpu(), y.cpu())
    assert keyed >= len(variants)


def test_versions_and_autograd_errors_survive_replay():
    """Replayed in-place ops bump version counters as keyed ones do: autograd still refuses a tensor
    saved for backward and modified since."""
    w = torch.randn(3, requires_grad=True, device="jax")
    with jaxdev.eager_mode("fused"):
        for _ in range(3):
            a = w * 1.0
            b = a.exp()  # saves its result
            before = b._version
            b.add_(1.0)
            assert b._version == before + 1
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                b.sum().backward()
            recorder.flush()
        assert STATS.replayed > 0


def test_a_storage_of_another_size_is_not_the_last_calls_layout():
    """A flush takes its program's last input key itself where nothing differs (program._layout): the
    same ops on a view of a smaller storage are another layout, compiled apart with its own results,
    and the first layout's program serves the larger storage again after it."""
    big, small = torch.randn(8).to("jax"), torch.randn(6).to("jax")

    def run(x):
        y = x[:4].neg().abs()
        recorder.flush()
        return y.cpu()

    with jaxdev.eager_mode("fused"):
        for _ in range(3):  # learned, replayed, then its last key taken as it is
            run(big)
        STATS.reset()
        got = [run(x) for x in (small, big, big, small)]
        programs, hits = STATS.programs, STATS.hits
    for g, x in zip(got, (small, big, big, small)):
        assert torch.equal(g, x.cpu()[:4].abs())
    assert (programs, hits) == (1, 3)


def test_the_compiled_guard_answers_as_the_tuples(monkeypatch):
    """Every guarded call of a training step, asked again of an empty segment (its tensors all new
    inputs there) through the compiled key, through the key's tuples, and through another key's
    compiled guard (not read: the tuples decide): the same answers."""
    _, opt, record_step = _setup()
    calls, match = [], replay.match

    def watched(seg, child, args, kwargs):
        calls.append((child.expected, args, kwargs))
        return match(seg, child, args, kwargs)

    with jaxdev.eager_mode("fused"):
        for _ in range(2):
            record_step()
            opt.step()
        monkeypatch.setattr(replay, "match", watched)
        record_step()
        opt.step()
        answers = []
        for i, (e, args, kwargs) in enumerate(calls):
            other = calls[i - 1][0].guard
            for guard in (e.guard, None, other):
                got = replay._match(
                    recorder.Segment(), e.key, args, kwargs, e.lift, e.new_inputs, boxes.WrittenBox, guard
                )
                answers.append(None if got is None else [id(t) for t in got])
    assert len(calls) > 10 and any(a is not None for a in answers)
    assert answers[0::3] == answers[1::3] == answers[2::3]


@pytest.mark.parametrize("tail", ["abs", "exp"])
def test_a_key_after_replayed_ops_finds_their_inputs(monkeypatch, tail):
    """Replayed ops leave the segment's placeholder index stale (it is rebuilt when a key first reads an
    input, recorder.LAZY_REFRESH), and so does an upload's key, undone: an op keyed after both (a tail the
    trie has not seen there) takes the placeholder its input already has. The segment is the one keying
    every op builds, and so are the values."""
    x, w = torch.randn(4, 6).to("jax"), torch.randn(6, 3).to("jax")

    def call(end):
        h = torch.relu(x @ w)  # replayed from the second call on
        t = torch.tensor([2.0], device="jax")  # an upload: its key is undone, the segment goes on
        out = h.sum() + getattr(x, end)().sum() * t
        return out, _state(recorder._segment)

    with jaxdev.eager_mode("fused"):
        for _ in range(3):
            call("neg")[0].cpu()
        got, replayed = call(tail)
        got = got.cpu()
        assert replayed[1].count(x.untyped_storage().data_ptr()) == 1
        monkeypatch.setattr(replay, "_match", None)  # every op keyed
        expected, keyed = call(tail)
        expected = expected.cpu()
    assert replayed[0] == keyed[0] and replayed[2:] == keyed[2:]  # ops, layouts, numbers, slots, trie place
    assert replayed[1][:2] == keyed[1][:2] and len(replayed[1]) == len(keyed[1])  # x, w, then each call's upload
    assert torch.equal(got, expected)


def test_reads_and_uploads_run_at_once_as_their_keys_would(monkeypatch):
    """A copy of a jax tensor to CPU runs eagerly after the pending work, and a copy of a CPU tensor onto
    jax at once, without their keys being built (at_once.py): the same values, dtypes, counts and
    flushes as keyed (a repeated upload with ops between still ends the segment); an empty read is keyed."""
    from jaxdev.fused import at_once

    x = torch.randn(3, 4).to("jax")
    runs = {}
    for at_once_on in (True, False):
        monkeypatch.setattr(at_once, "READS_AT_ONCE", at_once_on)
        monkeypatch.setattr(at_once, "UPLOADS_AT_ONCE", at_once_on)
        STATS.reset()
        with jaxdev.eager_mode("fused"):
            y = x * 2
            z = [y + torch.tensor([float(i)], device="jax") for i in range(3)]  # an upload per step
            got = [y.cpu(), y.t().to("cpu", torch.float64), nn.Parameter(x + 1).cpu(), x[:0].cpu(), *z]
            got = [g.cpu() for g in got]
        runs[at_once_on] = (got, dict(STATS.eager), STATS.flushes, STATS.uploads)
    (now, *counts_now), (keyed, *counts_keyed) = runs[True], runs[False]
    for a, b in zip(now, keyed):
        assert a.dtype == b.dtype and a.stride() == b.stride() and torch.equal(a, b)
    assert counts_now == counts_keyed and counts_now[2] == 3
