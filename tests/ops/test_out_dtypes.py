"""out= tensors of another dtype than the result: every op OpInfo marks as taking out= is called with
its first sample on CPU and on jax, with an out= of the wrong dtype; jax must refuse with CPU's
exception and words, or accept and produce CPU's values in that dtype. PyTorch's rule depends on how
the op is built (jaxdev/ops/kit/out_dtypes.py): before it, jaxdev cast into any out= a safe cast allowed,
where CPU refuses 60 of these ops' out= of another dtype (mm, softmax, neg, floor, amax, dot, where...)."""

from __future__ import annotations

import warnings

import pytest
import torch
from jaxdev_testing import JAX, assert_same
from torch.testing._internal.common_methods_invocations import op_db

PAIRS = [(torch.float32, torch.float64), (torch.int64, torch.float32), (torch.float32, torch.bool)]

# Ops whose values are random, or that take CPU tensors beside device ones (_scaled_mm_v2's scales).
NOT_COMPARABLE = {"normal", "torch._scaled_mm_v2"}
RANDOM = {"bernoulli", "multinomial", "normal", "nn.functional.dropout", "rand_like", "randn_like", "randint_like"}

# Known divergences, each a message or an exception type that differs from CPU's (both refuse).
KNOWN = {
    ("mvlgamma", torch.bool): "CPU prefixes 'mvlgamma: '",
    ("nansum", torch.bool): "CPU raises NotImplementedError from its bool kernel",
    ("nanmean", torch.bool): "CPU raises NotImplementedError from its bool kernel",
}


def _cases():
    seen, cases = set(), []
    for op in op_db:
        if not op.supports_out or op.name in seen or op.name in NOT_COMPARABLE:
            continue
        seen.add(op.name)
        for src, out in PAIRS:
            if src not in op.supported_dtypes("cpu"):
                continue
            marks = []
            if (op.name, out) in KNOWN:
                marks = [pytest.mark.xfail(reason=KNOWN[op.name, out], strict=True)]
            cases.append(pytest.param(op, src, out, id=f"{op.name}-{src}-{out}".replace("torch.", ""), marks=marks))
    return cases


def _moved(x, device):
    if isinstance(x, (list, tuple)):
        return type(x)(_moved(y, device) for y in x)
    return x.to(device) if isinstance(x, torch.Tensor) else x


@pytest.mark.parametrize("op, src, out_dtype", _cases())
def test_out_of_another_dtype_as_on_cpu(op, src, out_dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sample = next(iter(op.sample_inputs("cpu", src)), None)
        if sample is None:
            pytest.skip("no sample for this dtype")
        reference = op(sample.input, *sample.args, **sample.kwargs)
        if not isinstance(reference, torch.Tensor):
            pytest.skip("out= of several tensors: covered by the cases in test_several_outputs")

        def run(device):
            out = torch.empty(reference.shape, dtype=out_dtype, device=device)
            args = [_moved(a, device) for a in sample.args]
            kwargs = {k: _moved(v, device) for k, v in sample.kwargs.items()}
            return op(_moved(sample.input, device), *args, **kwargs, out=out)

        try:
            expected = run("cpu")
        except Exception as cpu_error:
            with pytest.raises(type(cpu_error)) as raised:
                run(JAX)
            assert str(raised.value) == str(cpu_error)
            return
        actual = run(JAX)
    assert actual.dtype == expected.dtype
    if op.name not in RANDOM:
        assert_same(actual, expected, rtol=1e-5, atol=1e-5)


SEVERAL = {
    "max.dim": lambda d, v, i: torch.max(torch.arange(3.0, device=d), 0, out=(v, i)),
    "sort": lambda d, v, i: torch.sort(torch.arange(3.0, device=d), out=(v, i)),
    "topk": lambda d, v, i: torch.topk(torch.arange(3.0, device=d), 1, out=(v, i)),
    "median.dim": lambda d, v, i: torch.median(torch.arange(3.0, device=d), 0, out=(v, i)),
    "kthvalue": lambda d, v, i: torch.kthvalue(torch.arange(3.0, device=d), 1, out=(v, i)),
    "mode": lambda d, v, i: torch.mode(torch.arange(3.0, device=d), out=(v, i)),
    "cummax": lambda d, v, i: torch.cummax(torch.arange(3.0, device=d), 0, out=(v, i)),
}


@pytest.mark.parametrize("values, indices", [(torch.float64, torch.int64), (torch.float32, torch.int32)])
@pytest.mark.parametrize("name", list(SEVERAL))
def test_several_outputs(name, values, indices):
    def run(device):
        v, i = torch.empty(0, dtype=values, device=device), torch.empty(0, dtype=indices, device=device)
        return SEVERAL[name](device, v, i)

    with pytest.raises(RuntimeError) as cpu_error:
        run("cpu")
    with pytest.raises(RuntimeError) as raised:
        run(JAX)
    assert str(raised.value) == str(cpu_error.value)
