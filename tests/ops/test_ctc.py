"""jaxdev/ops/loss/ctc.py: CTC loss forward, gradients, outputs and errors (empty inputs included),
against CPU PyTorch."""

import pytest
import torch
import torch.nn.functional as F
from jaxdev_testing import JAX, assert_same, on_both

# --- CTC loss -------------------------------------------------------------------------------------------------

_CTC_LP = torch.randn(8, 3, 5, dtype=torch.float64)
_CTC_PADDED = torch.tensor([[1, 2, 2, 1], [3, 1, 0, 0], [4, 4, 4, 0]])
_CTC_CASES = {
    "padded": (_CTC_PADDED, [8, 6, 8], [4, 2, 3]),
    "empty_input_and_target": (_CTC_PADDED, [8, 0, 3], [4, 0, 3]),  # an impossible alignment: inf loss, NaN grad
    "empty_targets": (_CTC_PADDED, [8, 6, 8], [0, 0, 1]),
    "concatenated": (torch.tensor([1, 2, 2, 1, 3, 1, 4, 4, 4]), [8, 6, 8], [4, 2, 3]),
    "int32_tensor_lengths": (_CTC_PADDED.int(), torch.tensor([8, 6, 8]), torch.tensor([4, 2, 3])),
}


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    "kwargs",
    [
        dict(reduction="none"),
        dict(reduction="mean"),
        dict(reduction="sum", zero_infinity=True),
        dict(reduction="none", blank=4),  # a target holding the blank label
    ],
    ids=["none", "mean", "sum_zero_inf", "blank4"],
)
@pytest.mark.parametrize("case", list(_CTC_CASES))
def test_ctc_loss_and_gradient_like_cpu(case, kwargs, dtype):
    targets, il, tl = _CTC_CASES[case]
    results = []
    for device in ("cpu", JAX):
        x = _CTC_LP.detach().to(dtype).to(device).clone().requires_grad_()
        lengths = [v.to(device) if isinstance(v, torch.Tensor) else v for v in (il, tl)]
        out = F.ctc_loss(x.log_softmax(2), targets.to(device), *lengths, **kwargs)
        out.sum().backward()
        results.append((out.detach(), x.grad))
    (cpu_out, cpu_grad), (jax_out, jax_grad) = results
    tol = 1e-5 if dtype == torch.float32 else 1e-10
    assert_same(jax_out, cpu_out, rtol=tol, atol=tol)
    assert_same(jax_grad, cpu_grad, rtol=tol, atol=tol)


@pytest.mark.usefixtures("no_fallback")
def test_ctc_loss_forward_outputs_like_cpu():
    lp = _CTC_LP.log_softmax(2)
    nll, alpha = torch.ops.aten._ctc_loss(lp, _CTC_PADDED, [8, 6, 8], [4, 2, 3])
    jnll, jalpha = torch.ops.aten._ctc_loss(lp.to(JAX), _CTC_PADDED.to(JAX), [8, 6, 8], [4, 2, 3])
    assert_same(jnll, nll, rtol=1e-12, atol=1e-12)
    assert jalpha.shape == alpha.shape
    # CPU leaves alpha unwritten past each input's length and target's states; compare the written part
    for b, (il, tl) in enumerate(zip([8, 6, 8], [4, 2, 3])):
        torch.testing.assert_close(jalpha.cpu()[b, :il, : 2 * tl + 1], alpha[b, :il, : 2 * tl + 1])


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize(
    "args,match",
    [
        ((_CTC_PADDED, [8, 6, 8], [4, 2, 3], 5), "blank must be in label range"),
        ((_CTC_PADDED, [8, 6], [4, 2, 3]), "input_lengths must be of size batch_size"),
        ((_CTC_PADDED, [8, 6, 8], [4, 2]), "target_lengths must be of size batch_size"),
        ((_CTC_PADDED, [8, 6, 8], [5, 2, 3]), "size at least 5 at dimension 1"),
        ((_CTC_PADDED, [9, 6, 8], [4, 2, 3]), "at most 8, but got value 9"),
        ((_CTC_PADDED, [-1, 6, 8], [4, 2, 3]), "input_lengths to have value at least 0"),
        ((_CTC_PADDED, [8, 6, 8], [-1, 2, 3]), "target_lengths to have value at least 0"),
        ((_CTC_PADDED.flatten(), [8, 6, 8], [4, 2, 3]), "size 9 at dimension 0"),
        ((_CTC_PADDED.float(), [8, 6, 8], [4, 2, 3]), "scalar type Int"),
        ((_CTC_PADDED[:1], [8, 6, 8], [4, 2, 3]), "size 3 at dimension 0"),
    ],
)
def test_ctc_loss_errors_like_cpu(args, match):
    def call(d):
        targets, *rest = args
        return torch.ops.aten._ctc_loss(_CTC_LP.log_softmax(2).to(d), targets.to(d), *rest)

    on_both(call, match=match)
    on_both(
        lambda d: torch.ops.aten._ctc_loss(_CTC_LP.half().to(d), _CTC_PADDED.to(d), [8, 6, 8], [4, 2, 3]), match="Half"
    )


def _outcome(device, shape, dtype, target_dtype):
    log_probs = torch.rand(shape, device=device).to(dtype)
    targets = torch.tensor([], device=device, dtype=target_dtype)
    n = shape[1] if len(shape) == 3 else 0
    try:
        torch.ctc_loss(log_probs, targets, [0] * n, [0] * n, reduction=0)
    except Exception as e:  # the exception is the result compared
        return type(e), str(e)
    return None


@pytest.mark.usefixtures("no_fallback")
@pytest.mark.parametrize("shape", [(0, 0, 4), (0, 4), (0, 2, 4), (3, 0, 4)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("target_dtype", [torch.int64, torch.int32, torch.float32])
def test_empty_log_probs_raise_as_cpu(shape, dtype, target_dtype):
    expected = _outcome("cpu", shape, dtype, target_dtype)
    assert expected is not None
    assert _outcome("jax", shape, dtype, target_dtype) == expected


@pytest.mark.usefixtures("no_fallback")
def test_functional_ctc_loss_of_empty_inputs():
    empty = torch.tensor([], device="jax", dtype=torch.long)
    with pytest.raises(RuntimeError, match=r"^log_probs tensor must not be empty$"):
        F.ctc_loss(torch.rand(0, 0, 4, device="jax"), empty, empty, empty, reduction="none")
