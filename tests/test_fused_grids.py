"""A moved view reached on its storage's grid (jaxdev/fused/grids.py): a KV cache's position written as
one dynamic_update_slice of its elements, not its span cut out, scattered into and put back."""

from __future__ import annotations

import pytest
import torch

import jaxdev
from jaxdev.fused import grids, offsets, recorder

STATS = recorder.STATS

pytestmark = pytest.mark.usefixtures("per_op_after")


@pytest.fixture
def fresh(monkeypatch):
    """Nothing learned (as test_fused.py's fresh_recorder), and the grid windows the programs trace counted."""
    monkeypatch.setattr(recorder, "ROOT", recorder.Trie())
    monkeypatch.setattr(recorder, "_CHANGING", set())
    monkeypatch.setattr(recorder, "_VARIANTS", {})
    monkeypatch.setattr(offsets, "_SEEN", {})
    recorder.flush()
    traced = []
    usual = grids.window
    monkeypatch.setattr(grids, "window", lambda *a: traced.append(a[2]) or usual(*a))
    return traced


def _steps(device: str, shape: tuple, write, read=None, steps: int = 6) -> tuple[list, int]:
    """`write(cache, k, t)` at steps t (read back through `read(cache, t)` each step, or the whole cache at
    the end) under fused eager; the values and the programs built."""
    torch.manual_seed(0)
    cache = torch.randn(shape).to(device)
    ks = [torch.randn(shape).to(device) for _ in range(steps)]
    torch.jax.synchronize()
    built, out = STATS.programs, []
    with jaxdev.eager_mode("fused"):
        for t in range(steps):
            write(cache, ks[t], t)
            if read is not None:
                out.append(read(cache, t).cpu())
            torch.jax.synchronize()  # each step its own segment, as a decoding loop's token
        out.append(cache.cpu())
    return out, STATS.programs - built


def _same_as_cpu(shape, write, read=None, steps: int = 6) -> int:
    expected, _ = _steps("cpu", shape, write, read, steps)
    got, built = _steps("jax", shape, write, read, steps)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=0, atol=0)
    return built


def _kv_heads_first(cache, k, t):  # [B, H, T, D]: cache[:, :, t] = k's slot
    cache[:, :, t] = k[:, :, 0]


def _kv_positions_first(cache, k, t):  # [B, T, H, D] (transformers' layout): cache[:, t] = ...
    cache[:, t] = k[:, 0]


@pytest.mark.parametrize(("write", "shape"), [(_kv_heads_first, (2, 3, 8, 4)), (_kv_positions_first, (2, 8, 3, 4))])
def test_a_cache_position_is_written_on_its_grid(fresh, write, shape):
    """The moving position's program slices the cache as shaped, on the grid (the counted windows), and
    every step's values are CPU's; 6 positions build the first position's program and the moving one."""
    built = _same_as_cpu(shape, write)
    assert fresh, "the moved cache view was cut out as its span, not on its grid"
    assert all(g[0] == shape for g in fresh)
    assert built <= 2, built


def test_a_view_moving_on_two_axes_of_its_grid(fresh):
    """cache[b, :, t] with b and t both moving: both are digits of the offset on the grid's free axes."""
    built = _same_as_cpu((3, 2, 8, 4), lambda c, k, t: c[t % 3, :, t].add_(k[0, :, 0]), steps=7)
    assert fresh and built <= 2, built


def test_a_read_of_the_moved_position(fresh):
    """A view that moves and is only read (an attention's key at the position) reads its grid block."""
    read = lambda c, t: c[:, :, t] * 2 + 1
    built = _same_as_cpu((2, 3, 8, 4), lambda c, k, t: None, read)
    assert fresh and built <= 2, built


def test_a_sliding_window_keeps_its_span(fresh):
    """x[:, p:p + 3] += y: its own axis' start moves, which the grid would key program by program: it takes
    its span, one program for every start after the first."""
    built = _same_as_cpu((4, 12), lambda x, y, t: x[:, t : t + 3].add_(y[:, :3]), steps=8)
    assert not fresh and built <= 2, built


def test_the_grid_of_a_view():
    """grid_of: the view's dims each on their own axis of the array's shape, the offset's digit there
    leaving room; None otherwise."""
    cache = torch.zeros(2, 3, 8, 4)
    assert grids.grid_of(cache[:, :, 5], cache) == ((2, 3, 8, 4), ((0, 0), (1, 0), (3, 0)))
    assert grids.grid_of(cache[1, :, 5], cache) == ((2, 3, 8, 4), ((1, 0), (3, 0)))
    assert grids.grid_of(cache[:, :, 5], cache.reshape(-1)) is None  # its strides are no axis of a flat array
    assert grids.grid_of(cache[:, :, :, 1], cache) == ((2, 3, 8, 4), ((0, 0), (1, 0), (2, 0)))
    flat = torch.zeros(24)
    assert grids.grid_of(flat[5:9], flat) == ((24,), ((0, 5),))
    assert grids.grid_of(flat.view(4, 6)[:, 1:], flat) is None
