"""torch.optim's fused=True steps on jax (jaxdev/ops/fused_optimizers.py): one program per call, no CPU
fallback, and the values of the same optimizer with fused=True on CPU, state included: bit for bit for
float32 and bfloat16 where CPU's vector loop computes every element (tensor sizes a whole number of its
registers), close where its scalar loop computes a tensor's last elements."""

from __future__ import annotations

import copy

import pytest
import torch
from jaxdev_testing import JAX, PLATFORM, foreach_in_python

import jaxdev
from jaxdev.ops import foreach, fused_optimizers
from jaxdev.ops.kit import capabilities

optim = torch.optim
WHOLE = [(32, 16), (64,), (4, 8, 4)]  # sizes a whole number of CPU's vector registers
RAGGED = [(37, 19), (33,), (5, 3, 2), ()]
# CPU's roundings are followed on XLA's CPU backend; an accelerator runs the plain float32 formulas,
# within the dtype's usual tolerance
EXACT = {"rtol": 0, "atol": 0} if PLATFORM == "cpu" else {}


@pytest.fixture
def programs(monkeypatch):
    """The programs each kind of call ran: fused steps and foreach calls (the step counts' increment)."""
    ran = {"fused": 0, "foreach": 0}
    step, run = fused_optimizers._step, foreach._run

    def spy_step(*args):
        out = step(*args)
        ran["fused"] += out is not None
        return out

    def spy_run(*args, **kwargs):
        out = run(*args, **kwargs)
        ran["foreach"] += out is not None
        return out

    monkeypatch.setattr(fused_optimizers, "_step", spy_step)
    monkeypatch.setattr(foreach, "_run", spy_run)
    with foreach_in_python():
        yield ran


def train(device, cls, dtype, shapes, steps, fused=True, **kwargs):
    """Parameters and state after `steps` steps of cls(fused=...) on `device`, from seeded values."""
    g = torch.Generator().manual_seed(0)
    params = [torch.nn.Parameter(torch.randn(s, generator=g).to(dtype).to(device)) for s in shapes]
    opt = cls(params, fused=fused, **kwargs)
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=g).to(dtype).to(device)
        opt.step()
    state = [{k: v.cpu() for k, v in opt.state[p].items() if isinstance(v, torch.Tensor)} for p in params]
    return [p.detach().cpu() for p in params], state


CONFIGS = {
    "adamw": (optim.AdamW, {"weight_decay": 0.01}),
    "adamw amsgrad maximize": (optim.AdamW, {"amsgrad": True, "maximize": True, "betas": (0.3, 0.9)}),
    "adam weight_decay amsgrad": (optim.Adam, {"weight_decay": 0.1, "amsgrad": True}),
    "adam tensor lr": (optim.Adam, {"lr": torch.tensor(0.01)}),
    "sgd": (optim.SGD, {"lr": 0.1}),
    "sgd momentum nesterov": (optim.SGD, {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.01, "nesterov": True}),
    "sgd dampening maximize": (optim.SGD, {"lr": 0.1, "momentum": 0.9, "dampening": 0.1, "maximize": True}),
    "sgd tensor lr": (optim.SGD, {"lr": torch.tensor(0.05), "momentum": 0.5}),
    "adagrad": (optim.Adagrad, {"lr": 0.1, "weight_decay": 0.01, "lr_decay": 0.01}),
    "adagrad eps": (optim.Adagrad, {"lr": 0.1, "eps": 1e-3, "maximize": True}),
}


def _equal(got, want):
    (gp, gs), (wp, ws) = got, want
    for a, b in [*zip(gp, wp), *((x[k], y[k]) for x, y in zip(gs, ws) for k in x)]:
        torch.testing.assert_close(a, b, **EXACT)
    assert [x.keys() for x in gs] == [y.keys() for y in ws]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name", CONFIGS)
def test_a_fused_step_is_cpus(name, dtype):
    cls, kwargs = CONFIGS[name]
    jaxdev.reset_fallback_counts()
    got = train(JAX, cls, dtype, WHOLE, steps=3, **kwargs)
    assert jaxdev.fallback_counts() == {}
    if cls is optim.SGD and dtype is not torch.float32:
        # CPU's fused SGD leaves a half parameter's vector-loop elements unchanged (FusedSGDKernel.cpp's
        # half path never stores them; the scalar loop does): jaxdev computes them all as that scalar
        # loop does, in float32 rounded once a step, within bfloat16's rounding of CPU's float32 step
        want = train("cpu", cls, torch.float32, WHOLE, steps=3, **kwargs)
        for a, b in zip(got[0], want[0]):
            torch.testing.assert_close(a.float(), b, rtol=2e-2, atol=2e-2)
        return
    _equal(got, train("cpu", cls, dtype, WHOLE, steps=3, **kwargs))


@pytest.mark.per_op_mode("counts the kernel's calls, which fused eager's recording and replay change")
@pytest.mark.parametrize("name", CONFIGS)
def test_a_step_is_one_program(name, programs):
    cls, kwargs = CONFIGS[name]
    train(JAX, cls, torch.float32, WHOLE, steps=3, **kwargs)
    assert programs["fused"] == 3  # one program a step, over every tensor
    # and the step counts' increment (Adam, Adagrad), one foreach program a step
    assert programs["foreach"] == (0 if cls is optim.SGD else 3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", ["adamw", "adam weight_decay amsgrad", "sgd momentum nesterov", "adagrad"])
def test_the_scalar_loops_elements_are_within_an_ulp(name, dtype):
    """Tensors whose last elements CPU computes in its scalar loop (and a 0-dim one)."""
    cls, kwargs = CONFIGS[name]
    if cls is optim.SGD and dtype is torch.bfloat16:
        pytest.skip("CPU's fused SGD does not update half parameters' vector-loop elements")
    got = train(JAX, cls, dtype, RAGGED, steps=3, **kwargs)
    want = train("cpu", cls, dtype, RAGGED, steps=3, **kwargs)
    tol = {"rtol": 1e-6, "atol": 1e-7} if dtype is torch.float32 else {"rtol": 8e-3, "atol": 1e-5}
    for a, b in zip(got[0], want[0]):
        torch.testing.assert_close(a, b, **tol)


def _direct(device, op, scale, found, lr):
    g = torch.Generator().manual_seed(3)
    lists = [[torch.randn(16, 4, generator=g).to(device) for _ in range(3)] for _ in range(4)]
    lists[3] = [t.abs() for t in lists[3]]
    steps = [torch.tensor(2.0).to(device) for _ in range(3)]
    extra = {}
    if scale is not None:
        extra["grad_scale"] = torch.tensor([scale]).to(device)
    if found is not None:
        extra["found_inf"] = torch.tensor([found]).to(device)
    lr = torch.tensor(lr).to(device) if isinstance(lr, float) and device == JAX else lr
    op(
        *lists,
        [],
        steps,
        lr=lr,
        beta1=0.9,
        beta2=0.99,
        weight_decay=0.1,
        eps=1e-8,
        amsgrad=False,
        maximize=False,
        **extra,
    )
    return [t.cpu() for ts in lists for t in ts]


@pytest.mark.parametrize("op", [torch._fused_adamw_, torch._fused_adam_])
@pytest.mark.parametrize("scale,found", [(1000.0, None), (3.0, 0.0), (3.0, 1.0), (None, 1.0)])
def test_grad_scale_unscales_first_and_found_inf_skips(op, scale, found):
    jaxdev.reset_fallback_counts()
    got = _direct(JAX, op, scale, found, 1e-2)
    want = _direct("cpu", op, scale, found, 1e-2)
    assert jaxdev.fallback_counts() == {}
    for a, b in zip(got, want):  # params, unscaled grads, moments: or all untouched where found_inf is 1
        torch.testing.assert_close(a, b, **EXACT)
    if found == 1.0:
        assert all(torch.equal(a, b) for a, b in zip(got, _direct("cpu", lambda *a, **k: None, None, None, 0.0)))


def test_a_jax_tensor_lr_is_read_inside_the_program():
    got = _direct(JAX, torch._fused_adamw_, None, None, 3e-3)  # lr a jax tensor: no value read back
    want = _direct("cpu", torch._fused_adamw_, None, None, 3e-3)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, **EXACT)


def test_mixed_dtypes_are_refused_in_one_sentence():
    p = [torch.zeros(3, device=JAX), torch.zeros(3, device=JAX, dtype=torch.bfloat16)]
    g = [torch.ones_like(t) for t in p]
    with pytest.raises(RuntimeError, match="one dtype per call"):
        torch._fused_sgd_(p, g, [], weight_decay=0.0, momentum=0.0, lr=0.1, dampening=0.0, nesterov=False,
                          maximize=False, is_first_step=True)  # fmt: skip


def test_a_model_trains_with_fused_adamw_as_on_cpu():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    x, y = torch.randn(16, 8), torch.randn(16, 4)
    losses = {}
    for device in ("cpu", JAX):
        m = copy.deepcopy(model).to(device)
        opt = optim.AdamW(m.parameters(), lr=1e-2, weight_decay=0.01, fused=True)
        losses[device] = []
        for _ in range(5):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(m(x.to(device)), y.to(device))
            loss.backward()
            opt.step()
            losses[device].append(loss.item())
        losses[str(device) + " params"] = [p.detach().cpu() for p in m.parameters()]
    assert losses[JAX] == pytest.approx(losses["cpu"], rel=1e-5)
    assert losses[JAX][-1] < losses[JAX][0]
    for a, b in zip(losses[str(JAX) + " params"], losses["cpu params"]):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.fixture
def plain_formulas(monkeypatch):
    """The program an accelerator runs (fused_optimizers._exact off), here on CPU."""
    monkeypatch.setattr(fused_optimizers, "_exact", lambda: False)
    fused_optimizers._program.cache_clear()
    yield
    fused_optimizers._program.cache_clear()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", ["adamw", "adam weight_decay amsgrad", "sgd momentum nesterov", "adagrad"])
def test_the_plain_formulas_of_an_accelerator_are_close_to_cpu(name, dtype, plain_formulas):
    cls, kwargs = CONFIGS[name]
    if cls is optim.SGD and dtype is torch.bfloat16:
        pytest.skip("CPU's fused SGD does not update half parameters' vector-loop elements")
    got = train(JAX, cls, dtype, WHOLE, steps=3, **kwargs)
    want = train("cpu", cls, dtype, WHOLE, steps=3, **kwargs)
    for a, b in zip(got[0], want[0]):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("name", ["adamw", "sgd momentum nesterov", "adagrad"])
def test_float64_is_within_an_ulp_or_two(name):
    """float64 has no wider type to round CPU's way in: XLA's own contractions decide its last bit."""
    if capabilities.fact("float64_emulated"):
        pytest.skip("float64 is float32 pairs on this platform (a TPU): ~48 bits, not an ulp of float64")
    cls, kwargs = CONFIGS[name]
    got = train(JAX, cls, torch.float64, WHOLE, steps=3, **kwargs)
    want = train("cpu", cls, torch.float64, WHOLE, steps=3, **kwargs)
    for a, b in zip(got[0], want[0]):
        torch.testing.assert_close(a, b, rtol=1e-14, atol=1e-15)


def test_a_parameter_on_part_of_a_storage_runs_on_cpu():
    """A view (a parameter sliced out of a larger tensor) is not its whole storage: the fallback runs it.
    (Contiguous: CPU's fused kernels read a parameter's memory as contiguous.)"""
    base = torch.randn(4, 8)
    on_jax = base.to(JAX)
    args = {"weight_decay": 0.0, "momentum": 0.0, "lr": 0.1, "dampening": 0.0, "nesterov": False}
    args.update(maximize=False, is_first_step=True)
    jaxdev.reset_fallback_counts()
    with pytest.warns(UserWarning, match="part of a larger storage"):
        torch._fused_sgd_([on_jax[1:3]], [torch.ones(2, 8, device=JAX)], [], **args)
    torch._fused_sgd_([base[1:3]], [torch.ones(2, 8)], [], **args)
    assert jaxdev.fallback_counts() == {"aten::_fused_sgd_": 1}
    torch.testing.assert_close(on_jax.cpu(), base, rtol=0, atol=0)


def test_grad_scaler_steps_a_fused_adamw_and_skips_an_inf_step_as_on_cpu():
    weights, steps = {}, {}
    jaxdev.reset_fallback_counts()
    for device in ("cpu", JAX):
        torch.manual_seed(0)
        model = torch.nn.Linear(8, 4).to(device)
        opt = optim.AdamW(model.parameters(), fused=True)
        scaler = torch.amp.GradScaler(torch.device(device).type, init_scale=1024.0)
        for i in range(3):
            opt.zero_grad()
            loss = model(torch.randn(16, 8).to(device)).square().mean()
            scaler.scale(loss * float("inf") if i == 1 else loss).backward()
            scaler.step(opt)  # fused: grad_scale and found_inf go to the kernel
            scaler.update()
        weights[str(device)] = model.weight.detach().cpu()
        steps[str(device)] = opt.state[model.weight]["step"].item()
    assert jaxdev.fallback_counts() == {}
    assert steps[str(JAX)] == steps["cpu"] == 2  # the inf step changed nothing
    # the gradients are the model's (products summed in another order than CPU's), so not bit for bit
    torch.testing.assert_close(weights[str(JAX)], weights["cpu"], rtol=1e-5, atol=1e-6)
