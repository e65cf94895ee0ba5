"""Argument builders for the direct trials of op families whose schema alone does not say how to
call them (schema_samples): a fused optimiser takes lists of equal-shaped params, grads and
moments, a `*_backward` op takes a grad_output shaped like its forward's output, an RNN takes
weights consistent with one hidden size, a loss takes class indices as target, ...

`hint_for(base)` gives the builder of an overload's family (matched on the base name, without
`aten::` and the overload name), or None. A builder takes a `Ctx` (a seeded CPU generator and the
candidate's floating dtype) and returns CPU values by argument name; arguments it does not name are
built from the schema as usual, names the overload does not have are dropped, and a value whose
kind does not fit the overload's type (a list for a `str`, ...) is left to the schema builder, so
one builder serves a family's overloads (`conv_tbc`, `conv_tbc.out`; `_fused_adam` with a float or
a tensor `lr`). Values are moved to the trial's device except those wrapped in `OnCpu` (arguments
PyTorch requires on CPU, like a packed sequence's batch_sizes); `StorageOf(t)` stands for the
storage of `t` on the trial's device. Builders may run CPU ops to derive consistent arguments (a
forward to shape a backward's grad_output, lu_factor for lu_solve's LU and pivots). Nothing here
decides a verdict: the trial still runs the op on CPU and on jax with these values and compares.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from jaxdev.audit.facts.arguments import misc, networks, numerics
from jaxdev.audit.facts.arguments.values import ByType, Ctx, OnCpu, StorageOf

__all__ = ["ByType", "Ctx", "OnCpu", "StorageOf", "hint_for", "hinted_types"]


def _misc(c: Ctx, base: str) -> dict:
    return misc.MISC[base](c)


# The table: (pattern on the base name, builder). First match wins.
HINTS: list[tuple[str, Callable[[Ctx, str], dict]]] = [
    (r"_?upsample_\w+_backward|_?upsample_\w+[123]d", networks.upsample),
    (
        r"conv_tbc|_?convolution(_mode|_double_backward)?|conv_transpose[123]d|slow_conv\w*|thnn_conv2d|_slow_conv2d_\w+"
        r"|mkldnn_convolution|_nnpack_spatial_convolution",
        networks.conv,
    ),
    (r"batch_norm|_batch_norm\w*|_native_batch_norm_legit\w*", networks.batch_norm),
    (r"layer_norm|rms_norm", networks.norm_over_last),
    (r"_thnn_fused_lstm_cell_backward", networks.fused_lstm_cell_backward),
    (r"lstm|gru|rnn_tanh|rnn_relu|lstm_cell|gru_cell|rnn_tanh_cell|rnn_relu_cell", networks.rnn),
    (r"_pack_padded_sequence\w*|_pad_packed_sequence", networks.packed),
    (r"_fused_(adam|adamw|sgd|adagrad)", numerics.fused_optimiser),
    (r"_foreach_addc(mul|div)", numerics.foreach_pointwise_tensor),
    (r"_amp_update_scale", numerics.amp_update_scale),
    (r"nll_loss(2d|_nd)?|multilabel_margin_loss|cosine_embedding_loss|ctc_loss", networks.loss),
    (
        r"embedding_bag|_embedding_bag(_forward_only|_backward|_dense_backward|_per_sample_weights_backward)?",
        networks.embedding,
    ),
    (r"linalg_cholesky(_ex)?|lu_solve|orgqr|linalg_tensorinv|linalg_cond|linalg_norm|nuclear_norm", numerics.linalg),
    (r"grid_sampler|_grid_sampler_2d_cpu_fallback(_backward)?", numerics.grid_sampler),
    (r"affine_grid_generator(_backward)?", numerics.affine_grid),
    (r"_native_multi_head_attention|_transformer_encoder_layer_fwd", numerics.attention),
    (r"stft|istft", numerics.stft),
    (r"glu_jvp|glu_backward_jvp", numerics.glu_jvp),
    (
        r"index_select_backward|value_selecting_reduction_backward|trace_backward|embedding_backward",
        numerics.backward_of_reduction,
    ),
    (r"_?fake_quantize\w*", numerics.fake_quantize),
    (r"gradient", numerics.gradient),
    (r"\w+", _misc),
]


def hint_for(base: str) -> Callable[[Ctx], dict] | None:
    """The builder for an op family (`base`: the name without namespace and overload; a trailing
    `_` of in-place names is ignored), or None."""
    base = base.rstrip("_") if not base.startswith("__") else base
    for pattern, make in HINTS:
        if re.fullmatch(pattern, base):
            if make is _misc and base not in misc.MISC:
                return None
            return lambda c, _make=make: _make(c, base)
    return None


def hinted_types(base: str) -> dict[str, set[str]]:
    """Argument name -> the schema types the family's builder supplies beyond the schema builder's
    own (a `Storage`): static_untriable does not call those arguments unbuildable."""
    import torch

    make = hint_for(base)
    if make is None:
        return {}
    out: dict[str, set[str]] = {}
    try:
        values = make(Ctx(torch.Generator().manual_seed(0), torch.float32))
    except Exception:  # a builder that fails here fails in the trial too, where it is reported
        return {}
    for name, value in values.items():
        if isinstance(value, ByType):
            out[name] = {k for k, v in value.by_type.items() if isinstance(v, StorageOf)}
        elif isinstance(value, StorageOf):
            out[name] = {"Storage"}
    return out
