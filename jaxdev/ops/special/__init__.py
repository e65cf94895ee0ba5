"""Special functions (torch.special and their aten ops); importing this package registers them.

functions.py: the ones taken from JAX with PyTorch's conventions where JAX's differ (digamma(+0) is
-inf; xlogy(0, y) is 0 unless y is NaN; integer inputs give the default float dtype; half precision
computes in float32), and igamma/igammac through igamma.py, CPU's calc_igamma/calc_igammac ported.
i0e.py: i0e as CPU computes it, half precision element by element on CPU's loop paths.
zeta.py: the Hurwitz zeta and polygamma n >= 2 by CPU's Euler-Maclaurin summation in double
precision, which is also defined for a negative non-integer q, where JAX's zeta is off (by 3.5e-2 at
zeta(3, -7.5)) or NaN (CPU gives inf at q a non-positive integer).
digamma.py: CPU's float calc_digamma, where jaxdev's own float32 functions are chosen (a TPU).
polynomials.py: the orthogonal polynomials (Chebyshev, Hermite, Laguerre, Legendre).
bessel/: Bessel and Airy functions as Cephes evaluates them.
Gradients come from PyTorch's own derivative formulas.
"""

from jaxdev.ops.special import bessel, functions, i0e, polynomials, zeta  # noqa: F401
