"""Large uniform_/normal_ fills are drawn in chunks into the tensor's own buffer (jaxdev/ops/kit/chunked_draws.py):
the same values as the whole draw, bit for bit, and a peak of about the tensor itself."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from jaxdev import rng, tensor
from jaxdev.ops import random
from jaxdev.ops.kit import chunked_draws

pytestmark = pytest.mark.per_op_mode(
    "fused eager records a fill into its segment's program, which draws it whole (the chunked path is per-op's)"
)


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 64 values from 256 values on, so that small tensors take the chunked path; yields
    what each fill answered (True: drawn in chunks)."""
    monkeypatch.setattr(chunked_draws, "CHUNK", 64)
    monkeypatch.setattr(chunked_draws, "MIN_VALUES", 256)
    answers, fill = [], chunked_draws.fill
    monkeypatch.setattr(chunked_draws, "fill", lambda *args: answers.append(fill(*args)) or answers[-1])
    return answers


def _whole_draw(kind, seed, n, real, a, b):
    """The values as jaxdev drew them before chunking: its whole flat draw's program (random.py's
    _flat_uniform/_flat_normal as they were), from the seed's first key."""
    torch.manual_seed(seed)
    size = random._bucket(n)
    if kind == "uniform":
        program = jax.jit(lambda key, low, high: jax.random.uniform(key, (size,), real, low, high))
    else:
        program = jax.jit(lambda key, mean, scale: jax.random.normal(key, (size,), real) * scale + mean)
    return program(rng.next_key(), a, b)[:n]


_FILLS = {"uniform": lambda t: t.uniform_(-0.5, 2.0), "normal": lambda t: t.normal_(0.25, 3.0)}
_ARGS = {"uniform": (-0.5, 2.0), "normal": (0.25, 3.0)}


@pytest.mark.parametrize("kind", ["uniform", "normal"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_a_chunked_fill_has_the_whole_draws_values(small_chunks, kind, dtype):
    shape = (37, 29)  # 1073 values: 17 chunks, the last overlapping the one before
    torch.manual_seed(11)
    t = _FILLS[kind](torch.empty(shape, dtype=dtype, device="jax"))
    assert small_chunks == [True]  # drawn in chunks
    real = jnp.float64 if dtype == torch.float64 else jnp.float32
    want = _whole_draw(kind, 11, math.prod(shape), real, *_ARGS[kind]).reshape(shape)
    got = jnp.asarray(tensor.read(t))
    assert got.dtype == want.astype(got.dtype).dtype
    assert np.asarray(got).tobytes() == np.asarray(want.astype(got.dtype)).tobytes()


@pytest.mark.parametrize("kind", ["uniform", "normal"])
def test_a_generator_draws_the_same_chunked_or_whole(small_chunks, monkeypatch, kind):
    g = torch.Generator(device="jax")
    g.manual_seed(5)
    chunked = getattr(torch.empty(40, 30, device="jax"), f"{kind}_")(generator=g).cpu()
    monkeypatch.setattr(chunked_draws, "MIN_VALUES", 1 << 40)
    g.manual_seed(5)
    whole = getattr(torch.empty(40, 30, device="jax"), f"{kind}_")(generator=g).cpu()
    assert small_chunks == [True, False] and torch.equal(chunked, whole)


def test_the_fill_writes_into_the_tensors_own_buffer(small_chunks):
    w = torch.empty(64, 48, device="jax")
    box = tensor.BOXES[w.untyped_storage().data_ptr()]
    where = box.array.unsafe_buffer_pointer()
    torch.nn.init.kaiming_uniform_(w, a=math.sqrt(5))
    assert small_chunks == [True]
    assert box.array.unsafe_buffer_pointer() == where  # donated: no second buffer of the tensor's size
    assert box.array.shape == (64, 48) and float(w.abs().max()) > 0


def test_a_buffer_another_tensor_shares_is_left_alone(small_chunks):
    w = torch.zeros(64, 48, device="jax")
    twin = w.clone()  # a plain clone holds the same array: its buffer cannot be given away
    w.normal_()
    assert small_chunks == [True]
    assert float(twin.abs().max()) == 0 and float(w.abs().max()) > 0


@pytest.mark.parametrize("kind", ["uniform", "normal"])
@pytest.mark.parametrize("real", [jnp.float32, jnp.float64])
def test_this_jax_draws_chunks_as_it_draws_whole(kind, real):
    assert chunked_draws._agrees(kind, real)


def test_counters_carry_into_the_high_word():
    """A chunk starting just below 2**32 draws threefry's bits for counters start + i, hi:lo."""
    start, n = (1 << 32) - 3, 8
    data = jnp.asarray([7, 9, start >> 32, start & 0xFFFFFFFF], jnp.uint32)
    got = chunked_draws._offset_bits(data, 32, (n,))
    counters = np.arange(start, start + n, dtype=np.uint64)
    hi, lo = (counters >> np.uint64(32)).astype(np.uint32), counters.astype(np.uint32)
    b1, b2 = jax.extend.random.threefry2x32_p.bind(jnp.uint32(7), jnp.uint32(9), jnp.asarray(hi), jnp.asarray(lo))
    assert np.array_equal(np.asarray(got), np.asarray(b1 ^ b2))


_BENCHMARK = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "benchmarks", "init_memory.py"
)


@pytest.mark.skipif(
    not os.access("/proc/self/clear_refs", os.W_OK), reason="needs Linux's resettable RSS high-water mark"
)
@pytest.mark.parametrize("case", ["kaiming", "normal"])
def test_initialising_a_large_weight_peaks_well_below_twice_its_size(case):
    """torch.empty(8192, 8192) then the fill, in a fresh process (benchmarks/init_memory.py: the RSS
    high-water mark above what the process held before): the empty tensor's buffer takes the draw.
    Drawn whole it peaked at 4.0-4.1 times the weight (256 MiB); chunked 1.4-1.6, compiling included."""
    done = subprocess.run(
        [sys.executable, _BENCHMARK, "--one", case, "--size", "8192"], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    peak = float(done.stdout.split()[1].rstrip("x"))
    assert peak < 2.5, done.stdout
