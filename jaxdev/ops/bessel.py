"""Bessel and Airy functions of torch.special (J0/J1/Y0/Y1, modified I0/I1/K0/K1 and scaled K,
spherical J0, Airy Ai)."""
