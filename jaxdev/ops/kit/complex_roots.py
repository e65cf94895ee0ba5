"""complex64 acos and acosh on jaxdev's float32 functions, where those are chosen (a TPU).

Why. XLA's complex sqrt, acos and acosh are built on its real sqrt, log, atan2 and division, which a
TPU computes off CPU's (its sqrt 2 ulps, log 3,084 ulps, division 2 ulps; on a v5e, 2026-12-07, acos(1j)
had imaginary part -0.8813971 where CPU's cacosf gives -0.8813736, 2.7e-5 relative, and the complex
special-value test failed on expm1, acos and three more ops). These formulas take the corrected sqrt
and division (division.py), jaxdev's atan2 and asinh, and |z| without overflow or a rounded square:

  sqrt z as complex_sqrt.py computes it;
  acos z = 2 atan2(Re sqrt(1 - z), Re sqrt(1 + z)) + i asinh(Im(conj(sqrt(1 + z)) sqrt(1 - z)));
  acosh z = asinh(Re(conj(sqrt(z - 1)) sqrt(z + 1))) + 2i atan2(Im sqrt(z - 1), Re sqrt(z + 1))
  (Kahan, "Branch cuts for complex elementary functions", 1987).

Callers (complex_c99.py) pass finite parts with y >= +0 and apply Annex G's special values after.
"""

from __future__ import annotations

import jax
import numpy as np

from jaxdev.ops.kit import transcendentals_atan as ta
from jaxdev.ops.kit import transcendentals_inverse as ti
from jaxdev.ops.kit.complex_sqrt import sqrt_parts

_F = np.float32


def complex_acos(z):
    x, y = z.real, z.imag
    a_re, a_im = sqrt_parts(1 - x, -y)  # sqrt(1 - z)
    b_re, b_im = sqrt_parts(1 + x, y)  # sqrt(1 + z)
    re = _F(2) * ta.atan2_32(a_re, b_re)
    im = ti.asinh32(b_re * a_im - b_im * a_re)
    return jax.lax.complex(re, im)


def complex_acosh(z):
    x, y = z.real, z.imag
    a_re, a_im = sqrt_parts(x - 1, y)  # sqrt(z - 1)
    b_re, b_im = sqrt_parts(x + 1, y)  # sqrt(z + 1)
    re = ti.asinh32(a_re * b_re + a_im * b_im)
    im = _F(2) * ta.atan2_32(a_im, b_re)
    return jax.lax.complex(re, im)
