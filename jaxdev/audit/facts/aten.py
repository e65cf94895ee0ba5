"""Facts about aten overloads for the direct trials (schema_samples), as data: why an overload
cannot be tried, what its outputs leave unspecified, and the plausible values the schema builder
gives arguments by name. Imports nothing heavy."""

from __future__ import annotations

# Untriable categories (the `category` of an untriable verdict), decided before running anything
# except no_valid_sample, cpu_crash (found by running) and unsupported (jax raised UnsupportedError).
UNTRIABLE = {
    "sparse": "sparse layouts: jax tensors are dense and strided by design",
    "quantized": "quantized tensors: jaxdev has no quantized dtypes",
    "no_cpu_kernel": "no CPU kernel to compare with (only CUDA, MPS, MKLDNN, ... kernels)",
    "no_tensor": "no tensor or device argument: nothing of it runs on jax",
    "argument": "an argument type the schema cannot be built for",
    "no_valid_sample": "no valid sample found: CPU rejected every candidate built from the schema",
    "cpu_crash": "the CPU kernel crashed or hung on a candidate",
    "unsupported": "jaxdev cannot hold these tensors by design (UnsupportedError)",
    "python": "no Python OpOverload for it (torch.ops cannot call it)",
    "nested": "nested tensors: jax tensors are dense and strided by design",
    "host_only": "pins host memory: it takes CPU tensors on every device (a CUDA tensor's raises too)",
}
HOST_ONLY = frozenset({"pin_memory", "_pin_memory"})

SPARSE_WORDS = ("sparse", "_csr", "_csc", "_bsr", "_bsc", "coo", "_nnz", "coalesce", "crow_", "ccol_")
SPARSE_NAMES = frozenset(
    {"indices", "values", "_indices", "_values", "col_indices", "row_indices", "dense_dim", "sparse_dim", "_to_dense"}
    # the copies of sparse views, and products defined for a sparse self only
    | {"indices_copy", "values_copy", "_indices_copy", "_values_copy", "col_indices_copy", "row_indices_copy"}
    | {"smm", "sspaddmm", "_spdiags"}  # _spdiags builds a sparse tensor (its layout= is a sparse one)
)
UNBUILDABLE = ("Storage", "Stream", "CellParamsBase", "QScheme", "Dict")

# Allocations whose values are whatever was in memory (any overload): a sample that reaches only
# these is compared by shape and dtype, like a random op.
UNINITIALISED = frozenset(
    {
        "aten::empty",
        "aten::empty_like",
        "aten::empty_strided",
        "aten::empty_permuted",
        "aten::new_empty",
        "aten::new_empty_strided",
    }
)
# Allocations only the trials meet, beside UNINITIALISED and any overload named *empty*:
# new_empty's `empty({})`, the zero tensor and dependency tokens that hold no values.
UNINITIALISED_TRIALS = frozenset({"aten::new_empty", "aten::_efficientzerotensor", "aten::_make_dep_token"})
# Results that name the device itself (get_device: -1 on CPU, the index on jax): compared by type.
DEVICE_RESULTS = frozenset({"aten::get_device"})
UNCHECKED = "values unchecked: random op, uninitialised memory or a device-dependent result"


# Outputs (positions among the op's flattened outputs: the returned ones, then an out= overload's
# written tensors) that CPU's kernel leaves partly unwritten by design, so their values are compared by
# shape and dtype only: _ctc_loss's log_alpha (returned 1, out= 3) is written only within each
# sample's input and target lengths.
PARTLY_UNWRITTEN: dict[str, tuple[int, ...]] = {"aten::_ctc_loss": (1, 3)}

# ---------------------------------------------------------------------------------------------
# Decompositions whose factors are unique only up to a gauge (signs or phases of singular vectors,
# eigenvectors, Q's columns; the order of eigenvalues): compared once both sides are normalised.

# family -> kind: svd with V (columns) or Vh (rows), eigh, eig, eigvals, qr
GAUGE = {
    "svd": "svd_v",
    "linalg_svd": "svd_vh",
    "_linalg_svd": "svd_vh",
    "linalg_eigh": "eigh",
    "_linalg_eigh": "eigh",
    "linalg_eig": "eig",
    "_linalg_eig": "eig",
    "linalg_eigvals": "eigvals",
    "qr": "qr",
    "linalg_qr": "qr",
}
GAUGE_NOTE = "equal to CPU up to what the decomposition leaves unspecified (signs/phases of vectors, eigenvalue order)"

# ---------------------------------------------------------------------------------------------
# Values the schema builder gives arguments: candidate shapes and dtypes, and by argument name


SHAPES = ((3, 3), (2, 3, 3), (5,), (), (2, 3, 4, 4), (2, 3, 4), (1, 2, 3, 4, 4), (4, 1))
DTYPE_NAMES = ("float32", "int64", "bool", "complex64", "float64")
INDEX_NAMES = frozenset(
    {"index", "indices", "idx", "offsets", "lengths", "batch_sizes", "indices_or_sections", "crow_indices"}
)
HINT_DTYPES = ("float32", "float64")  # candidate dtypes of an arg_hints builder
MAX_CANDIDATES = 1000  # CPU attempts per overload before giving up (each costs microseconds to milliseconds)


INTS = {
    "dim": 0,
    "dim0": 0,
    "dim1": 1,
    "start": 0,
    "end": 2,
    "length": 1,
    "groups": 1,
    "diagonal": 0,
    "offset": 0,
    "padding_idx": -1,
    "reduction": 1,
    "ignore_index": -100,
    "num_classes": 3,
    "high": 3,
    "low": 0,
    "to": 3,
    "from": 0,
    "repeats": 2,
    "split_size": 1,
    "chunks": 1,
    "sections": 1,
    "window_length": 4,
    "bins": 4,
    "minlength": 0,
    "n": 2,
    "N": 3,
    "k": 1,
    "correction": 1,
    "step": 1,
    "num_samples": 2,
    "batch_dim": 0,
    "level": 0,
}
STRINGS = {
    "reduce": "sum",
    "reduction": "mean",
    "mode": "constant",
    "padding_mode": "zeros",
    "interpolation": "linear",
    "side": "left",
    "approximate": "none",
    "padding": "valid",
    "rounding_mode": "trunc",
    "indexing": "ij",
    "norm": "backward",
    "driver": "gesvd",
    "UPLO": "L",
}
