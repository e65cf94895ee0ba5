"""torch.manual_seed makes random ops on jax reproducible; distributions are sensible."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

N = 4096  # one sample size for every distribution check, so each op compiles once

RANDOM_OPS = {
    "rand": lambda: torch.rand(N, device="jax"),
    "randn": lambda: torch.randn(N, device="jax"),
    "randint": lambda: torch.randint(3, 9, (N,), device="jax"),
    "randperm": lambda: torch.randperm(50, device="jax"),
    "normal_": lambda: torch.empty(N, device="jax").normal_(3.0, 2.0),
    "normal": lambda: torch.normal(torch.full((N,), 3.0, device="jax"), 2.0),
    "uniform_": lambda: torch.empty(N, device="jax").uniform_(-2.0, 5.0),
    "bernoulli": lambda: torch.bernoulli(torch.full((N,), 0.3, device="jax")),
    "bernoulli_": lambda: torch.zeros(N, device="jax").bernoulli_(0.3),
    "dropout": lambda: F.dropout(torch.ones(N, device="jax"), p=0.5, training=True),
    "multinomial": lambda: torch.multinomial(torch.tensor([0.1, 0.2, 0.0, 0.7], device="jax"), N, replacement=True),
    "multinomial_no_replacement": lambda: torch.multinomial(torch.ones(8, device="jax"), 8),
    "rand_like": lambda: torch.rand_like(torch.zeros(N, device="jax")),
    "randn_like": lambda: torch.randn_like(torch.zeros(N, device="jax")),
}


def _draw(name, seed):
    torch.manual_seed(seed)
    t = RANDOM_OPS[name]()
    assert t.device.type == "jax", f"{name} made a tensor on {t.device}"
    return t.cpu()


@pytest.mark.parametrize("name", list(RANDOM_OPS))
def test_manual_seed_reproduces(name):
    first = _draw(name, 1234)
    again = _draw(name, 1234)
    assert torch.equal(first, again), f"{name}: same seed, different values"


@pytest.mark.parametrize("name", list(RANDOM_OPS))
def test_different_seeds_and_consecutive_calls_differ(name):
    a = _draw(name, 1)
    b = _draw(name, 2)
    assert not torch.equal(a, b), f"{name}: seeds 1 and 2 gave the same values"
    torch.manual_seed(1)
    first = RANDOM_OPS[name]().cpu()
    second = RANDOM_OPS[name]().cpu()
    assert not torch.equal(first, second), f"{name}: two consecutive calls gave the same values"


def test_torch_jax_manual_seed_alone_reproduces():
    torch.jax.manual_seed(77)
    a = torch.randn(8, device="jax").cpu()
    torch.jax.manual_seed(77)
    b = torch.randn(8, device="jax").cpu()
    assert torch.equal(a, b)


def test_cpu_draws_do_not_disturb_the_jax_stream():
    """As with CUDA, the jax generator is its own stream, independent of CPU's."""
    torch.manual_seed(3)
    a = torch.rand(8, device="jax").cpu()
    torch.manual_seed(3)
    torch.rand(100)  # CPU draw in between
    b = torch.rand(8, device="jax").cpu()
    assert torch.equal(a, b)


def test_rng_state_save_restore_and_fork_rng():
    torch.manual_seed(10)
    torch.rand(3, device="jax")
    state = torch.jax.get_rng_state()
    a = torch.randn(8, device="jax").cpu()
    torch.jax.set_rng_state(state)
    assert torch.equal(torch.randn(8, device="jax").cpu(), a)
    torch.jax.set_rng_state(state)
    with torch.random.fork_rng(device_type="jax"):
        torch.randn(8, device="jax")
    assert torch.equal(torch.randn(8, device="jax").cpu(), a), "fork_rng did not restore the jax state"


# --- distributions (fixed seed, loose bounds: about 5 standard errors) -------------------------------


def _stats(t):
    t = t.double()
    return t.mean().item(), t.std().item()


def _se(std):
    return 5 * std / math.sqrt(N)


def test_rand_is_uniform_on_unit_interval():
    x = _draw("rand", 0)
    assert x.dtype == torch.float32 and x.min() >= 0 and x.max() < 1
    mean, std = _stats(x)
    assert abs(mean - 0.5) < _se(0.2887) and abs(std - 0.2887) < 0.02


def test_randn_is_standard_normal():
    for name in ("randn", "randn_like"):
        x = _draw(name, 0)
        mean, std = _stats(x)
        assert abs(mean) < _se(1) and abs(std - 1) < 0.05, (name, mean, std)
        assert 0.6 < (x.abs() < 1).double().mean().item() < 0.76  # ~68% within one sigma


def test_randn_float64():
    torch.manual_seed(0)
    x = torch.randn(N, dtype=torch.float64, device="jax")
    assert x.dtype == torch.float64
    mean, std = _stats(x.cpu())
    assert abs(mean) < _se(1) and abs(std - 1) < 0.05


def test_randint_covers_its_range_evenly():
    x = _draw("randint", 0)
    assert x.dtype == torch.int64 and x.min() == 3 and x.max() == 8
    counts = torch.bincount(x - 3, minlength=6).double() / N
    assert (counts - 1 / 6).abs().max() < 0.03, counts


def test_randperm_is_a_permutation():
    x = _draw("randperm", 0)
    assert x.dtype == torch.int64
    assert torch.equal(x.sort().values, torch.arange(50))
    assert not torch.equal(x, torch.arange(50))
    torch.manual_seed(0)
    assert torch.randperm(7, dtype=torch.int32, device="jax").dtype == torch.int32


@pytest.mark.parametrize("name", ["normal_", "normal"])
def test_normal_has_requested_mean_and_std(name):
    mean, std = _stats(_draw(name, 0))
    assert abs(mean - 3) < _se(2) and abs(std - 2) < 0.1


def test_uniform_respects_bounds():
    x = _draw("uniform_", 0)
    assert x.min() >= -2 and x.max() < 5
    mean, _ = _stats(x)
    assert abs(mean - 1.5) < _se(7 / math.sqrt(12))


@pytest.mark.parametrize("name", ["bernoulli", "bernoulli_"])
def test_bernoulli(name):
    x = _draw(name, 0)
    assert x.dtype == torch.float32
    assert set(x.unique().tolist()) == {0.0, 1.0}
    assert abs(x.mean().item() - 0.3) < _se(math.sqrt(0.21))


def test_bernoulli_respects_per_element_probabilities():
    torch.manual_seed(0)
    p = torch.tensor([0.0, 1.0] * (N // 2), device="jax")
    x = torch.bernoulli(p).cpu()
    assert torch.equal(x, p.cpu())


def test_dropout_zeroes_about_p_and_scales_the_rest():
    x = _draw("dropout", 0)
    kept = x != 0
    assert abs(kept.double().mean().item() - 0.5) < _se(0.5)
    assert torch.all(x[kept] == 2.0)


def test_dropout_eval_and_module():
    x = torch.arange(8.0, device="jax")
    assert torch.equal(F.dropout(x, p=0.5, training=False).cpu(), torch.arange(8.0))
    layer = torch.nn.Dropout(0.25).to("jax")
    layer.eval()
    assert torch.equal(layer(x).cpu(), torch.arange(8.0))
    layer.train()
    torch.manual_seed(0)
    out = layer(torch.ones(N, device="jax")).cpu()
    scale = torch.tensor(1 / 0.75, dtype=torch.float32).item()
    assert set(out.unique().tolist()) <= {0.0, scale}


def test_multinomial_with_replacement_frequencies():
    x = _draw("multinomial", 0)
    assert x.dtype == torch.int64 and x.shape == (N,)
    freq = torch.bincount(x, minlength=4).double() / N
    assert freq[2] == 0, "a zero-probability category was drawn"
    assert (freq - torch.tensor([0.1, 0.2, 0.0, 0.7], dtype=torch.float64)).abs().max() < 0.04, freq


@pytest.mark.per_op_mode("a negative probability raises at the op; fused mode raises it at the next sync")
def test_multinomial_without_replacement_draws_distinct():
    x = _draw("multinomial_no_replacement", 0)
    assert torch.equal(x.sort().values, torch.arange(8))
    torch.manual_seed(0)
    rows = torch.multinomial(torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]], device="jax"), 2).cpu()
    assert sorted(rows[0].tolist()) == [1, 2]
    with pytest.raises(RuntimeError):  # like CPU: a negative probability
        torch.multinomial(torch.tensor([-1.0, 1.0], device="jax"), 1)


# --- torch.Generator(device="jax") ------------------------------------------------------------------


def test_a_jax_generator_replays_its_own_stream():
    g = torch.Generator(device="jax")
    assert g.device == torch.device("jax", 0) and isinstance(g, torch.Generator)
    assert isinstance(torch.default_generator, torch.Generator) and torch.Generator().device.type == "cpu"
    g.manual_seed(7)
    first = torch.randn(6, generator=g, device="jax").cpu()
    second = torch.randn(6, generator=g, device="jax").cpu()
    assert not torch.equal(first, second)
    g.manual_seed(7)
    assert torch.equal(torch.randn(6, generator=g, device="jax").cpu(), first)
    state = g.get_state()
    draw = torch.rand(5, generator=g, device="jax").cpu()
    g.set_state(state)
    assert torch.equal(torch.rand(5, generator=g, device="jax").cpu(), draw)


def test_generators_are_independent_of_the_device_state():
    g = torch.Generator(device="jax").manual_seed(3)
    torch.manual_seed(0)
    a = torch.randn(4, device="jax").cpu()
    torch.randn(4, generator=g, device="jax")
    torch.manual_seed(0)
    assert torch.equal(torch.randn(4, device="jax").cpu(), a)


def test_every_random_op_takes_a_generator():
    g = torch.Generator(device="jax").manual_seed(1)

    def draws():
        g.manual_seed(1)
        x = torch.empty(8, device="jax")
        return [
            x.normal_(generator=g).cpu().clone(),
            x.uniform_(generator=g).cpu().clone(),
            x.bernoulli_(0.3, generator=g).cpu().clone(),
            x.random_(0, 5, generator=g).cpu().clone(),
            torch.randint(0, 9, (4,), generator=g, device="jax").cpu(),
            torch.randperm(6, generator=g, device="jax").cpu(),
            torch.multinomial(torch.ones(5, device="jax"), 3, generator=g).cpu(),
            torch.bernoulli(torch.full((6,), 0.5, device="jax"), generator=g).cpu(),
        ]

    for a, b in zip(draws(), draws()):
        assert torch.equal(a, b)


def test_a_jax_generator_pickles():
    import pickle

    g = torch.Generator(device="jax").manual_seed(5)
    copy = pickle.loads(pickle.dumps(g))
    assert copy.device.type == "jax"
    assert torch.equal(
        torch.rand(3, generator=copy, device="jax").cpu(), torch.rand(3, generator=g, device="jax").cpu()
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_random_fills_floats_with_the_integers_they_hold_exactly(dtype):
    digits = {torch.float16: 11, torch.bfloat16: 8, torch.float32: 24, torch.float64: 53}[dtype]
    x = torch.empty(4000, dtype=dtype, device="jax").random_().cpu().double()
    assert x.min() >= 0 and x.max() <= 2**digits and torch.equal(x, x.round())


def test_keys_are_the_eager_formulas_made_in_one_call():
    """next_key builds fold_in(fold_in(key(lo), offset), hi) in one jitted call: the same keys as the
    three eager calls it replaced, so seeded streams are unchanged."""
    import jax

    from jaxdev import rng

    def eager(lo, offset, hi):
        return jax.random.key_data(jax.random.fold_in(jax.random.fold_in(jax.random.key(lo), offset), hi))

    saved = rng._state.seed, rng._state.offset
    try:
        for seed, offset in [(0, 0), (12345, 7), (2**64 - 1, 2**31 + 5), (67280421310721, 99)]:
            rng._state.seed, rng._state.offset = seed, offset
            got = jax.random.key_data(rng.next_key())
            assert (got == eager(seed & 0xFFFF_FFFF, offset, seed >> 32)).all()
            assert rng._state.offset == offset + 1
        rng._state.offset = 2**32 + 3  # eager fold_in refused this offset; it wraps as traced keys do
        assert (jax.random.key_data(rng.next_key()) == eager(seed & 0xFFFF_FFFF, 3, seed >> 32)).all()
    finally:
        rng._state.seed, rng._state.offset = saved
