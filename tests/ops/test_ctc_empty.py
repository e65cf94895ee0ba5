"""ctc_loss of an empty log_probs raises CPU's error (PyTorch's TestNNDeviceType.test_ctc_loss_error),
before the other argument checks and after the dtype check, as CPU's kernel orders them; jax used to fail
inside its kernel with JAX's IndexError."""

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.usefixtures("no_fallback")


def _outcome(device, shape, dtype, target_dtype):
    log_probs = torch.rand(shape, device=device).to(dtype)
    targets = torch.tensor([], device=device, dtype=target_dtype)
    n = shape[1] if len(shape) == 3 else 0
    try:
        torch.ctc_loss(log_probs, targets, [0] * n, [0] * n, reduction=0)
    except Exception as e:  # the exception is the result compared
        return type(e), str(e)
    return None


@pytest.mark.parametrize("shape", [(0, 0, 4), (0, 4), (0, 2, 4), (3, 0, 4)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16])
@pytest.mark.parametrize("target_dtype", [torch.int64, torch.int32, torch.float32])
def test_empty_log_probs_raise_as_cpu(shape, dtype, target_dtype):
    expected = _outcome("cpu", shape, dtype, target_dtype)
    assert expected is not None
    assert _outcome("jax", shape, dtype, target_dtype) == expected


def test_functional_ctc_loss_of_empty_inputs():
    empty = torch.tensor([], device="jax", dtype=torch.long)
    with pytest.raises(RuntimeError, match=r"^log_probs tensor must not be empty$"):
        F.ctc_loss(torch.rand(0, 0, 4, device="jax"), empty, empty, empty, reduction="none")
