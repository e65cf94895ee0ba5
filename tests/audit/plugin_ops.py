"""Test-only ops and OpInfos, loaded by the auditor (and its workers) through JAXDEV_AUDIT_PLUGINS.

good   x * 2 on jax (x * 3 when JAXDEV_TEST_BREAK=1: a deliberately broken kernel)
crash  kills its worker with SIGSEGV on the 2-element sample only
hang   sleeps forever on the 2-element sample only
slow   sleeps 2 s per sample (for killing a sweep mid-way)
rounding  3 * x where CPU's float32 is off by a relative 8e-6 (a rounding error ~6 tolerances at
       these values) and jax's by JAXDEV_TEST_ERROR (default 4e-6: closer to the float64 result)
wobbly 3 * x where CPU alternates between two results for identical calls (off by a relative
       8e-6, then by 2e-7: as a CPU kernel whose reduction order varies between calls), in float32
       and float64; jax's is off by JAXDEV_TEST_WOBBLE (default 0: in float32 within tolerance of
       CPU's second result, in float64 of neither)
twice  2 * x in float32, bfloat16 and float64, differentiable (its backward is the op twice_grad);
       right eagerly, and broken only while a compiled graph is traced, as named in
       JAXDEV_TEST_BREAK_TRACED (comma-separated): `forward-DTYPE` makes the traced forward 3 * x
       in that dtype, `backward` the traced twice_grad 3 * g
"""

import os
import signal
import time

import torch
from torch.testing._internal.common_dtype import _dispatch_dtypes
from torch.testing._internal.opinfo.core import OpInfo, SampleInput

from jaxdev import tracing

NS = "jaxdev_audit_test"
_LIB = torch.library.Library(NS, "DEF")


def _define(name, device_kernel):
    _LIB.define(f"{name}(Tensor x) -> Tensor")
    _LIB.impl(name, lambda x: x * 2, "CPU")
    _LIB.impl(name, torch.empty_like, "Meta")  # shapes for torch.compile's fake tensors
    _LIB.impl(name, device_kernel, "PrivateUse1")


def _good(x):
    factor = 3 if os.environ.get("JAXDEV_TEST_BREAK") == "1" else 2
    return (x.cpu() * factor).to(x.device)


def _crash(x):
    if x.numel() == 2:
        os.kill(os.getpid(), signal.SIGSEGV)
    return (x.cpu() * 2).to(x.device)


def _hang(x):
    if x.numel() == 2:
        time.sleep(3600)
    return (x.cpu() * 2).to(x.device)


def _slow(x):
    time.sleep(2)
    return (x.cpu() * 2).to(x.device)


def _samples(op_info, device, dtype, requires_grad, **kwargs):
    for n in (1, 2, 3):
        yield SampleInput(torch.arange(n, device=device, dtype=dtype))


OPINFOS = []
for _name, _kernel in (("good", _good), ("crash", _crash), ("hang", _hang), ("slow", _slow)):
    _define(_name, _kernel)
    OPINFOS.append(
        OpInfo(
            f"{NS}.{_name}",
            op=getattr(getattr(torch.ops, NS), _name),
            dtypes=_dispatch_dtypes((torch.float32,)),
            sample_inputs_func=_samples,
            supports_autograd=False,
            supports_out=False,
        )
    )


def _rounding_cpu(x):
    exact = x.double() * 3
    return (exact if x.dtype == torch.float64 else exact * (1 + 8e-6)).to(x.dtype)


def _rounding_jax(x):
    error = float(os.environ.get("JAXDEV_TEST_ERROR", "4e-6"))
    return (x.cpu().double() * 3 * (1 + error)).to(x.dtype).to(x.device)


def _rounding_samples(op_info, device, dtype, requires_grad, **kwargs):
    for n in (2, 3):
        yield SampleInput(50 + 10 * torch.arange(n, device=device, dtype=dtype))


_LIB.define("rounding(Tensor x) -> Tensor")
_LIB.impl("rounding", _rounding_cpu, "CPU")
_LIB.impl("rounding", torch.empty_like, "Meta")
_LIB.impl("rounding", _rounding_jax, "PrivateUse1")
OPINFOS.append(
    OpInfo(
        f"{NS}.rounding",
        op=torch.ops.jaxdev_audit_test.rounding,
        dtypes=_dispatch_dtypes((torch.float32,)),
        sample_inputs_func=_rounding_samples,
        supports_autograd=False,
        supports_out=False,
    )
)


def _broken_traced(what: str) -> bool:
    return tracing.tracing_now() and what in os.environ.get("JAXDEV_TEST_BREAK_TRACED", "").split(",")


def _twice_jax(x):
    return x * (3 if _broken_traced(f"forward-{str(x.dtype).removeprefix('torch.')}") else 2)


def _twice_grad_jax(g):
    return g * (3 if _broken_traced("backward") else 2)


def _twice_samples(op_info, device, dtype, requires_grad, **kwargs):
    for n in (2, 3):
        yield SampleInput(torch.arange(1, n + 1, device=device, dtype=dtype, requires_grad=requires_grad))


for _name, _kernel in (("twice", _twice_jax), ("twice_grad", _twice_grad_jax)):
    _LIB.define(f"{_name}(Tensor x) -> Tensor")
    _LIB.impl(_name, lambda x: x * 2, "CPU")
    _LIB.impl(_name, torch.empty_like, "Meta")
    _LIB.impl(_name, _kernel, "PrivateUse1")
torch.library.register_autograd(
    f"{NS}::twice",
    lambda ctx, g: torch.ops.jaxdev_audit_test.twice_grad(g),
    setup_context=lambda ctx, inputs, output: None,
)
OPINFOS.append(
    OpInfo(
        f"{NS}.twice",
        op=torch.ops.jaxdev_audit_test.twice,
        dtypes=_dispatch_dtypes((torch.float32, torch.bfloat16, torch.float64)),
        sample_inputs_func=_twice_samples,
        supports_out=False,
    )
)


_WOBBLES = [0]


def _wobbly_cpu(x):
    _WOBBLES[0] += 1
    off = 8e-6 if _WOBBLES[0] % 2 else 2e-7
    return (x.double() * 3 * (1 + off)).to(x.dtype)


def _wobbly_jax(x):
    error = float(os.environ.get("JAXDEV_TEST_WOBBLE", "0"))
    return (x.cpu().double() * 3 * (1 + error)).to(x.dtype).to(x.device)


_LIB.define("wobbly(Tensor x) -> Tensor")
_LIB.impl("wobbly", _wobbly_cpu, "CPU")
_LIB.impl("wobbly", torch.empty_like, "Meta")
_LIB.impl("wobbly", _wobbly_jax, "PrivateUse1")
OPINFOS.append(
    OpInfo(
        f"{NS}.wobbly",
        op=torch.ops.jaxdev_audit_test.wobbly,
        dtypes=_dispatch_dtypes((torch.float32, torch.float64)),
        sample_inputs_func=_rounding_samples,
        supports_autograd=False,
        supports_out=False,
    )
)
