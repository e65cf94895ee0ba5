"""Orthogonal polynomials of torch.special (Chebyshev T/U/V/W and their shifted forms, Hermite H/He,
Laguerre L, Legendre P) with a tensor degree n."""
