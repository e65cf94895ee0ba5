"""A Python float or complex in an op's key: told apart by its bits where == would not.

The recorder keys an op's scalar arguments as (type, value) and finds the op's place in the trie by
comparing keys (a dict lookup, the native replay guard). Python's == says 0.0 == -0.0 and nan != nan,
and hashes 0.0 and -0.0 alike, so keyed by value:
* `torch.pow(-0.0, t)` met after `torch.pow(0.0, t)` replayed the program compiled for 0.0: inf where
  CPU (and per-op mode) give -inf; `torch.full(s, -0.0)` filled +0.0, `clamp(min=-0.0)` clamped to
  +0.0, `x * complex(1, -0.0)` multiplied by 1 + 0j;
* a NaN argument (a fresh `float('nan')` each call) never met its key again: a new trie child, learnt
  and compiled at every call, until the op was taken out as "called with other numbers every time".
A value whose == is its bits' (a nonzero, non-NaN float: equal such floats have equal bits) keeps
(type, value); a zero or NaN (a complex with a zero or NaN part) is keyed (type, its bytes) instead:
bytes never equal a float, a complex or one another unless bit for bit. The native guard
(jaxdev/csrc/fused.cpp, number_matches) compares an argument to either form by bits, the same rule.
Types stay apart as before: (int, 1), (float, 1.0) and (bool, True) are different parts.
"""

from __future__ import annotations

import struct

_DOUBLE = struct.Struct("d")  # native order: the bytes C++ reads from a double (fused.cpp)
_COMPLEX = struct.Struct("dd")  # Py_complex's (real, imag)


def float_part(a: float) -> tuple:
    """Float `a`'s key part (the recorder inlines the common case: a nonzero, non-NaN float)."""
    return (float, a) if a and a == a else (float, _DOUBLE.pack(a))


def complex_part(a: complex) -> tuple:
    """Complex `a`'s key part: by bits where either part is zero or NaN (1 + 0j and 1 - 0j differ)."""
    re, im = a.real, a.imag
    if re and im and re == re and im == im:
        return (complex, a)
    return (complex, _COMPLEX.pack(re, im))
