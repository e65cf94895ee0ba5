"""Linear algebra kernels; importing this package registers them.

products.py: matrix products (mm, bmm, addmm, baddbmm, addbmm, dot, mv, vdot, addmv, addr), whose
precision is the device's contract (kit.product_precision).
lapack.py: what the LAPACK kernels share (CPU's strides, info and errors, refused dtypes); its
docstring gives the conventions. The kernels: decompositions.py (SVD, eigendecompositions, QR and
Householder products), lu.py, cholesky.py, ldl.py, lstsq.py and matrix_exp.py.
"""

from jaxdev.ops.kit import matmul  # re-exported: linalg.matmul is kit.matmul
from jaxdev.ops.linalg import cholesky, decompositions, ldl, lstsq, lu, matrix_exp, products  # noqa: F401

__all__ = ["matmul"]
