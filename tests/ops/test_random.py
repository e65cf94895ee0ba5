"""jaxdev/ops/random.py: the random kernels' argument checks, complex fills and dropout's backward."""

from __future__ import annotations

import pytest
import torch
from jaxdev_testing import JAX, on_both, same_outcome

pytestmark = pytest.mark.usefixtures("no_fallback")  # tests/conftest.py


@pytest.mark.parametrize("method", ["uniform_", "normal_"])
def test_random_fill_of_complex_like_cpu(method):
    """Both parts drawn alike, as CPU does through view_as_real: uniform in [2, 3), normal around 1."""
    args = (2.0, 3.0) if method == "uniform_" else (1.0, 2.0)
    z = getattr(torch.empty(20000, dtype=torch.complex64, device=JAX), method)(*args).cpu()
    cpu = getattr(torch.empty(20000, dtype=torch.complex64), method)(*args)
    for part in (torch.real, torch.imag):
        assert abs(part(z).mean() - part(cpu).mean()) < 0.05
        assert abs(part(z).std() - part(cpu).std()) < 0.05
    if method == "uniform_":
        assert z.real.min() >= 2 and z.imag.max() < 3


def t(device, values, dtype=None):
    return torch.tensor(values, device=device, dtype=dtype)


def ones(device, *shape, dtype=None):
    return torch.ones(*shape, device=device, dtype=dtype)


def empty(device, *shape, dtype=None):
    return torch.empty(*shape, device=device, dtype=dtype)


I8, U8 = torch.int8, torch.uint8

RANDOM_CASES = {
    "randint beyond int8": lambda d: torch.randint(0, 300, (4,), dtype=I8, device=d),
    "randint below int8": lambda d: torch.randint(-200, 3, (4,), dtype=I8, device=d),
    "randint bool": lambda d: torch.randint(0, 3, (4,), dtype=torch.bool, device=d),
    "randint half beyond its range": lambda d: torch.randint(0, 70000, (4,), dtype=torch.half, device=d),
    "randint int8 in range": lambda d: torch.randint(-128, 128, (4,), dtype=I8, device=d),
    "random_ beyond int8": lambda d: empty(d, 4, dtype=I8).random_(0, 300),
    "random_ to beyond int8": lambda d: empty(d, 4, dtype=I8).random_(300),
    "random_ uint8 from -1": lambda d: empty(d, 4, dtype=U8).random_(-1, 3),
    "random_ empty int8": lambda d: empty(d, 0, dtype=I8).random_(0, 300),
    "random_ uint16": lambda d: empty(d, 4, dtype=torch.uint16).random_(0, 70000),
    "random_ complex": lambda d: empty(d, 4, dtype=torch.complex64).random_(0, 3),
    "random_ complex default": lambda d: empty(d, 4, dtype=torch.complex64).random_(),
    "random_ half with a warning": lambda d: empty(d, 4, dtype=torch.half).random_(0, 5000),
    "randperm int8": lambda d: torch.randperm(300, dtype=I8, device=d),
    "randperm int8 129": lambda d: torch.randperm(129, dtype=I8, device=d),
    "randperm int8 128": lambda d: torch.randperm(128, dtype=I8, device=d),
    "randperm uint8 out": lambda d: torch.randperm(257, out=empty(d, 0, dtype=U8)),
    "randperm half": lambda d: torch.randperm(3000, dtype=torch.half, device=d),
    "randperm half 2049": lambda d: torch.randperm(2049, dtype=torch.half, device=d),
    "randperm half 70000": lambda d: torch.randperm(70000, dtype=torch.half, device=d),
    "randperm float": lambda d: torch.randperm(2**24 + 2, dtype=torch.float32, device=d),
    "randperm bool": lambda d: torch.randperm(3, dtype=torch.bool, device=d),
    "randperm complex": lambda d: torch.randperm(3, dtype=torch.complex64, device=d),
    "bernoulli p 1.5": lambda d: torch.bernoulli(t(d, [1.5])),
    "bernoulli p -0.5": lambda d: torch.bernoulli(t(d, [0.5, -0.5])),
    "bernoulli p nan": lambda d: torch.bernoulli(t(d, [float("nan")])),
    "bernoulli half p 2": lambda d: torch.bernoulli(t(d, [2.0, 0.5], torch.half)),
    "bernoulli_ tensor p 1.5": lambda d: torch.zeros(2, device=d).bernoulli_(t(d, [1.5, 0.5], torch.float64)),
    "bernoulli int64": lambda d: torch.bernoulli(ones(d, 2, dtype=torch.int64)),
    "bernoulli bool": lambda d: torch.bernoulli(ones(d, 2, dtype=torch.bool)),
    "bernoulli complex": lambda d: torch.bernoulli(ones(d, 2, dtype=torch.complex64)),
    "bernoulli empty int64": lambda d: torch.bernoulli(empty(d, 0, dtype=torch.int64)),
    "bernoulli_ int64 p": lambda d: torch.zeros(2, device=d).bernoulli_(ones(d, 2, dtype=torch.int64)),
    "bernoulli_ complex self": lambda d: torch.zeros(2, dtype=torch.complex64, device=d).bernoulli_(0.5),
    "bernoulli_ int64 self": lambda d: torch.zeros(2, dtype=torch.int64, device=d).bernoulli_(0.5),
    "randn int64": lambda d: torch.randn(2, dtype=torch.int64, device=d),
    "randn bool": lambda d: torch.randn(2, dtype=torch.bool, device=d),
    "normal_ int64, negative std": lambda d: empty(d, 2, dtype=torch.int64).normal_(0, -1),
    "normal_ empty int64": lambda d: empty(d, 0, dtype=torch.int64).normal_(),
    "rand bool": lambda d: torch.rand(2, dtype=torch.bool, device=d),
    "uniform_ int64": lambda d: empty(d, 2, dtype=torch.int64).uniform_(),
    "uniform_ empty int64": lambda d: empty(d, 0, dtype=torch.int64).uniform_(),
    "uniform_ half from beyond": lambda d: empty(d, 2, dtype=torch.half).uniform_(-1e6, 0),
    "uniform_ half span beyond": lambda d: empty(d, 2, dtype=torch.half).uniform_(-60000, 60000),
    "uniform_ float to inf": lambda d: empty(d, 2).uniform_(0, float("inf")),
    "uniform_ from > to": lambda d: empty(d, 2).uniform_(2, 1),
}


@pytest.mark.parametrize("case", list(RANDOM_CASES))
def test_random_checks_as_on_cpu(case):
    same_outcome(RANDOM_CASES[case], values=False)


def test_random_warns_where_a_float_cannot_hold_the_range():
    with pytest.warns(UserWarning, match=r"to - 1 is out of bounds \[-\(2\^11\), 2\^11\]"):
        empty(JAX, 4, dtype=torch.half).random_(0, 5000)


# --- native_dropout_backward: grad * mask * scale, so integer and bool gradients come back as float ---


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int16, torch.int64, torch.float16, torch.float64])
def test_native_dropout_backward_result_dtype(dtype):
    g = (torch.arange(-12, 12).reshape(4, 6) * 37).to(dtype)
    mask = torch.arange(24).reshape(4, 6) % 3 != 0
    on_both(lambda d: torch.ops.aten.native_dropout_backward(g.to(d), mask.to(d), 1.7))
