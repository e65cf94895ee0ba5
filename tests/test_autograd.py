"""autograd runs through the dispatcher; gradients land on jax and equal CPU's."""

from __future__ import annotations

import threading

import pytest
import torch
from jaxdev_testing import JAX, assert_same, on_both, run_python

import jaxdev.ops.registry as registry

TOL = dict(rtol=1e-5, atol=1e-6)


def _grads(fn, *shapes_values):
    """Run `fn(*leaves)` on CPU and jax; compare outputs and the gradients of every leaf."""

    def scenario(device):
        leaves = [v.clone().to(device).requires_grad_() for v in shapes_values]
        out = fn(*leaves)
        out.backward(torch.ones_like(out))
        return out.detach(), [leaf.grad for leaf in leaves]

    return on_both(scenario, **TOL)


X = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
W = torch.tensor([[0.1, 0.2], [-0.3, 0.4], [0.5, -0.6]])

GRAPHS = {
    "mul_sum": (lambda x: (x * x).sum(), X),
    "add_sub_div": (lambda x, y: ((x + 1) / (y.t().abs() + 1) - x).sum(), X, W),
    "exp_log": (lambda x: (x.exp() + (x * x + 1).log()).mean(), X),
    "tanh_sigmoid": (lambda x: torch.tanh(x) * torch.sigmoid(x), X),
    "relu": (lambda x: torch.relu(x).sum(0), X),
    "matmul": (lambda x, w: x @ w, X, W),
    "mm_chain": (lambda x, w: (x @ w).t() @ (x @ w), X, W),
    "reshape": (lambda x: x.reshape(3, 2) * torch.arange(6.0, device=x.device).reshape(3, 2), X),
    "flatten_view": (lambda x: x.flatten().view(2, 3).sum(1), X),
    "transpose_permute": (lambda x: x.t().unsqueeze(0).permute(2, 1, 0), X),
    "index_select_slice": (lambda x: x[1, ::2] * x[:, 1].sum(), X),
    "advanced_index": (lambda x: x[torch.tensor([1, 0, 1], device=x.device)].sum(0), X),
    "expand_broadcast": (lambda x: (x[:1].expand(4, 3) * 2).sum(), X),
    "softmax": (lambda x: torch.softmax(x, dim=1) * torch.arange(3.0, device=x.device), X),
    "log_softmax": (lambda x: torch.log_softmax(x, dim=0), X),
    "pow_sqrt": (lambda x: (x.abs() + 1).sqrt() ** 3, X),
    "max_min": (lambda x: x.max(1).values + x.min(0).values.sum(), X),
    "cat_stack": (lambda x: torch.cat([x, x * 2], 0).sum(0) + torch.stack([x[0], x[1]]).sum(0), X),
    "where": (lambda x: torch.where(x > 0, x, x * 3), X),
    "clamp": (lambda x: x.clamp(-0.5, 1.0), X),
    "linear": (lambda x, w: torch.nn.functional.linear(x, w.t(), torch.ones(2, device=x.device)), X, W),
    "mse_loss": (lambda x: torch.nn.functional.mse_loss(x, torch.zeros_like(x)), X),
    "cross_entropy": (lambda x: torch.nn.functional.cross_entropy(x, torch.tensor([2, 0], device=x.device)), X),
    "to_dtype": (lambda x: x.to(torch.float64).sum().to(torch.float32), X),
    "norm": (lambda x: x.norm(), X),
}


@pytest.mark.parametrize("name", list(GRAPHS))
def test_backward_matches_cpu(name):
    fn, *inputs = GRAPHS[name]
    _, grads = _grads(fn, *inputs)
    for g in grads:
        assert g is not None and g.device == JAX


def test_grad_of_composite_op_is_not_lost():
    """The origin bug, behaviourally: a CompositeImplicitAutograd op (reshape) keeps its gradient."""
    x = torch.ones(2, 3, device="jax", requires_grad=True)
    y = x.reshape(6)
    assert type(y.grad_fn).__name__ != "CppFunction", y.grad_fn
    y.sum().backward()
    assert x.grad is not None
    assert_same(x.grad, torch.ones(2, 3))


def test_gradients_accumulate():
    def scenario(device):
        x = torch.tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
        (x * x).sum().backward()
        (x * 3).sum().backward()
        return x.grad

    on_both(scenario)


def test_autograd_grad_and_retain_graph():
    def scenario(device):
        x = torch.tensor([1.0, -2.0, 3.0], device=device, requires_grad=True)
        y = (x**3).sum()
        (g,) = torch.autograd.grad(y, x, create_graph=True)
        (gg,) = torch.autograd.grad(g.sum(), x)
        return g.detach(), gg

    on_both(scenario, **TOL)


def test_no_grad_and_detach():
    x = torch.ones(2, device="jax", requires_grad=True)
    with torch.no_grad():
        y = x * 2
    assert not y.requires_grad and y.grad_fn is None
    assert not x.detach().requires_grad


def test_grad_from_cpu_leaf_through_to_jax():
    def scenario(device):
        cpu_leaf = torch.tensor([1.0, 2.0], requires_grad=True)
        moved = cpu_leaf.to(device)
        (moved * moved).sum().backward()
        return cpu_leaf.grad.tolist(), cpu_leaf.grad.device.type  # back across the device boundary

    on_both(scenario)


def test_module_training_step_matches_cpu():
    def scenario(device):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
        model.to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x = X.to(device)
        target = torch.tensor([[1.0, 0.0], [0.0, 1.0]], device=device)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), target)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
        return losses, {k: v for k, v in model.state_dict().items()}

    on_both(scenario, **TOL)


def test_adam_step_matches_cpu():
    def scenario(device):
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 2).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=0.01, foreach=False)
        for _ in range(2):
            opt.zero_grad()
            model(X.to(device)).pow(2).sum().backward()
            opt.step()
        return dict(model.state_dict())

    on_both(scenario, **TOL)


# --- the registry refuses the origin bug --------------------------------------------------------


def test_registry_refuses_composite_implicit_op_without_autograd_kernel():
    op = torch.ops.aten.reshape.default
    assert registry.is_composite_implicit(op)

    def fake_kernel(*args, **kwargs):
        raise AssertionError("must never be registered")

    with pytest.raises(registry.RegistrationError, match="aten::reshape"):
        registry.register(op)(fake_kernel)
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("aten::reshape", "PrivateUse1")
    assert "aten::reshape" not in registry.KERNELS
    # reshape still decomposes, with its gradient.
    x = torch.ones(2, 2, device="jax", requires_grad=True)
    x.reshape(4).sum().backward()
    assert_same(x.grad, torch.ones(2, 2))


@pytest.mark.parametrize(
    "op", [torch.ops.aten.linear.default, torch.ops.aten.flatten.using_ints, torch.ops.aten.to.dtype]
)
def test_registry_refuses_other_composite_ops(op):
    with pytest.raises(registry.RegistrationError):
        registry.register(op)(lambda *a, **k: None)
    assert not torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "PrivateUse1")


def test_no_registered_composite_op_lacks_an_autograd_kernel():
    """Audit of the whole dispatcher table: the refusal has no holes."""
    bad = []
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::"):
            continue
        if (
            torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1")
            and torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeImplicitAutograd")
            and not torch._C._dispatch_has_kernel_for_dispatch_key(name, "AutogradPrivateUse1")
            # a derivative formula registered for every backend (the Autograd alias): registry.FORMULA_COMPOSITES
            and not torch._C._dispatch_has_kernel_for_dispatch_key(name, "Autograd")
        ):
            bad.append(name)
    assert not bad, f"CompositeImplicitAutograd ops with a jax kernel but no autograd kernel: {bad}"


def _backward_thread(x) -> int:
    """The thread that ran x's backward (a gradient hook records it)."""
    seen = []
    y = (x * 2).sum()
    y.register_hook(lambda g: seen.append(threading.get_ident()))
    y.backward()
    return seen[0]


def test_backward_runs_on_the_calling_thread():
    """Autograd's device worker thread would take each backward from this thread and back (a GIL
    hand-off per call); jaxdev turns that off for the thread that imported it."""
    x = torch.ones(3, device=JAX, requires_grad=True)
    assert _backward_thread(x) == threading.get_ident()
    assert_same(x.grad, torch.full((3,), 2.0, device=JAX))


def test_backward_in_another_thread_uses_pytorchs_default():
    x = torch.ones(3, device=JAX, requires_grad=True)
    result = {}

    def work():
        result["caller"] = threading.get_ident()
        result["backward"] = _backward_thread(x)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    assert result["backward"] != result["caller"]  # PyTorch's device thread ran it there
    assert_same(x.grad, torch.full((3,), 2.0, device=JAX))


def test_backward_thread_env_keeps_the_device_thread():
    code = (
        "import threading, torch, jaxdev\n"
        "x = torch.ones(3, device='jax', requires_grad=True)\n"
        "seen = []\n"
        "y = (x * 2).sum()\n"
        "y.register_hook(lambda g: seen.append(threading.get_ident()))\n"
        "y.backward()\n"
        "print(seen[0] != threading.get_ident(), x.grad.cpu().tolist())\n"
    )
    proc = run_python(code, env={"JAXDEV_BACKWARD_THREAD": "device"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[-2] == "True [2.0, 2.0, 2.0]"


@pytest.mark.parametrize("hook", ["tensor", "node_pre", "node_post", "post_accumulate"])
def test_an_exception_in_a_backward_hook_is_raised(hook):
    """PyTorch's Python-backend device guard calls Python from noexcept functions, so a hook that
    raised during backward aborted the process; jaxdev's native guard (jaxdev/native.py) raises it."""
    from jaxdev import native

    if native.module is None:
        pytest.skip(f"the native module is not in use ({native.unavailable}): PyTorch's Python guard aborts here")
    code = f"""
        import torch, jaxdev
        x = torch.randn(3, device="jax", requires_grad=True)
        y = x * 2
        kind = {hook!r}
        if kind == "tensor":
            x.register_hook(lambda g: 1 / 0)
        elif kind == "node_pre":
            y.grad_fn.register_prehook(lambda g: 1 / 0)
        elif kind == "node_post":
            y.grad_fn.register_hook(lambda gi, go: 1 / 0)
        else:
            x.register_post_accumulate_grad_hook(lambda p: 1 / 0)
        try:
            y.sum().backward()
        except ZeroDivisionError:
            print("raised")
        w = torch.randn(3, device="jax", requires_grad=True)
        (w * 3).sum().backward()  # the device works on
        print(w.grad is not None)
        """
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["raised", "True"]
