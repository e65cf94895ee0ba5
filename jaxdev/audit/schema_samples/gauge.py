"""Decompositions whose factors are unique only up to a gauge (facts.aten.GAUGE): compared once both
sides are normalised."""

from __future__ import annotations

from jaxdev.audit.facts.aten import GAUGE


def _projectors(vectors):
    """v v^H per column (the last dim indexes the vectors): invariant to each column's phase."""
    return vectors.unsqueeze(-2) * vectors.conj().unsqueeze(-3)  # (..., n, n, k) -> by column k


def _canonical(kind: str, outs: tuple) -> tuple:
    """What the decomposition determines: singular values / eigenvalues (sorted where the order is
    free), the rank-one projectors of each vector, the reconstruction of the factored matrix
    (svd, qr), R with a real non-negative diagonal (qr)."""
    import torch

    if kind in ("svd_v", "svd_vh"):
        u, s, v = outs[:3]
        if u.numel() == 0 or v.numel() == 0:  # compute_uv=False: nothing but S is specified
            return (u.shape, s, v.shape)
        k = s.shape[-1]
        v = v[..., :k] if kind == "svd_v" else v[..., :k, :].mT.conj()
        u = u[..., :k]
        return (s, _projectors(u), _projectors(v), (u * s.unsqueeze(-2).to(u.dtype)) @ v.mT.conj())
    if kind == "eigh":
        values, vectors = outs[:2]
        return (values,) if vectors.numel() == 0 else (values, _projectors(vectors))
    if kind in ("eig", "eigvals"):
        values = outs[0] if kind == "eig" else outs
        # by real part (rounded: a conjugate pair's real parts may differ in the last bits), then
        # imaginary part: a stable sort by the first key after one by the second
        order = torch.sort(values.imag, dim=-1, stable=True).indices
        by_real = torch.take_along_dim(values.real.to(torch.float64).round(decimals=4), order, -1)
        order = torch.take_along_dim(order, torch.sort(by_real, dim=-1, stable=True).indices, -1)
        values = torch.take_along_dim(values, order, -1)
        if kind == "eigvals":
            return (values,)
        vectors = torch.take_along_dim(outs[1], order.unsqueeze(-2), -1)
        return (values, _projectors(vectors))
    if kind == "qr":
        q, r = outs[:2]
        if q.numel() == 0:  # mode "r"
            return (q.shape, r.abs())
        k = min(r.shape[-2], r.shape[-1])
        d = torch.diagonal(r[..., :k, :k], dim1=-2, dim2=-1)
        phase = torch.where(d.abs() > 0, d / d.abs(), torch.ones_like(d))
        return (q[..., :k] * phase.unsqueeze(-2), r[..., :k, :] * phase.conj().unsqueeze(-1))
    raise ValueError(kind)


def gauge_free(name: str, actual, expected) -> bool:
    """Whether outputs that differ as they are agree once the decomposition's gauge is removed
    (GAUGE): shapes and dtypes as they are, the rest by _canonical with the dtype's tolerances.
    `actual`/`expected`: the trial's outputs (the op's result, then the arguments it wrote)."""
    import torch

    from jaxdev.audit import check

    kind = GAUGE.get(name.split("::", 1)[-1].split(".")[0])
    if kind is None or check.differs(actual, expected, 0.0, 0.0, values=False) is not None:
        return False
    # the result, and the written arguments (out= variants) when they are the result's tensors
    groups = [(actual[0], expected[0])]
    if len(expected) > 1:
        written = (tuple(actual[1:]), tuple(expected[1:]))
        groups.append(written if kind != "eigvals" else (actual[1], expected[1]))
    try:
        for a, e in groups:
            shaped = isinstance(e, torch.Tensor) if kind == "eigvals" else isinstance(e, (tuple, list)) and len(e) >= 2
            if not shaped:
                return False
            if check.differs(_canonical(kind, a), _canonical(kind, e), 0.0, 0.0) is not None:
                return False
        return True
    except Exception:
        return False
