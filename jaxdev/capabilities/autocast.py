"""`torch.autocast("jax")`: PyTorch ships autocast kernels for CUDA, CPU, XPU, MPS... but none for
PrivateUse1, so without this every op under autocast on jax fails at the AutocastPrivateUse1 key.

Same policy as CUDA's (aten/src/ATen/autocast_mode.cpp): ops that profit from low precision run in
the autocast dtype (default bfloat16), ops that need range run in float32, every other op passes
through unchanged. Only floating jax tensors other than float64 are cast, as on CUDA.
"""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_map

_KEY = torch._C.DispatchKey.AutocastPrivateUse1
_EXCLUDE = torch._C.DispatchKeySet(_KEY)

LOWER_PRECISION = [
    "conv1d",
    "conv1d.padding",
    "conv2d",
    "conv2d.padding",
    "conv3d",
    "conv3d.padding",
    "conv_transpose1d",
    "conv_transpose2d.input",
    "conv_transpose3d.input",
    "convolution",
    "_convolution",
    "prelu",
    "addmm",
    "addmv",
    "addr",
    "matmul",
    "einsum",
    "mm",
    "mv",
    "linear",
    "addbmm",
    "baddbmm",
    "bmm",
    "chain_matmul",
    "linalg_multi_dot",
    "_thnn_fused_lstm_cell",
    "_thnn_fused_gru_cell",
    "lstm_cell",
    "gru_cell",
    "rnn_tanh_cell",
    "rnn_relu_cell",
    "scaled_dot_product_attention",
]
FLOAT32 = [
    "acos",
    "asin",
    "cosh",
    "erfinv",
    "exp",
    "expm1",
    "log",
    "log10",
    "log2",
    "log1p",
    "reciprocal",
    "rsqrt",
    "sinh",
    "tan",
    "pow.Tensor_Scalar",
    "pow.Tensor_Tensor",
    "pow.Scalar",
    "softplus",
    "layer_norm",
    "group_norm",
    "norm.Scalar",
    "norm.ScalarOpt_dim",
    "cosine_similarity",
    "poisson_nll_loss",
    "cosine_embedding_loss",
    "nll_loss",
    "nll_loss2d",
    "hinge_embedding_loss",
    "kl_div",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "mse_loss",
    "margin_ranking_loss",
    "multilabel_margin_loss",
    "soft_margin_loss",
    "triplet_margin_loss",
    "multi_margin_loss",
    "binary_cross_entropy_with_logits",
    "dist",
    "pdist",
    "cdist",
    "renorm",
    "logsumexp",
    "prod",
    "prod.dim_int",
    "softmax.int",
    "log_softmax.int",
    "cross_entropy_loss",
    "cumsum",
    "cumprod",
    "sum",
    "sum.dim_IntList",
]

_LIB = torch.library.Library("aten", "IMPL")
_FALLTHROUGH = torch.library.Library("_", "IMPL")


def _eligible(x) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == "jax" and x.is_floating_point() and x.dtype != torch.float64


def _policy(op, target):
    def kernel(*args, **kwargs):
        dtype = torch.get_autocast_dtype("jax") if target is None else target

        def cast(x):
            return x.to(dtype) if _eligible(x) and x.dtype != dtype else x

        with torch._C._ExcludeDispatchKeyGuard(_EXCLUDE):
            return op(*tree_map(cast, args), **tree_map(cast, kwargs))

    return kernel


def install() -> None:
    for names, target in ((LOWER_PRECISION, None), (FLOAT32, torch.float32)):
        for name in names:
            packet, _, overload = name.partition(".")
            op = getattr(getattr(torch.ops.aten, packet), overload or "default")
            _LIB.impl(op, _policy(op, target), "AutocastPrivateUse1")
    _FALLTHROUGH.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")
