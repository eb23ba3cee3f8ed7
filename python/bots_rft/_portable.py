"""Arithmetic whose result the CPU cannot change, for every value that reaches a posterior, a pick
or a checkpoint.

numpy dispatches its transcendental ufuncs (``exp``, ``log``, ``power``, ``sin``…) to different
SIMD kernels on different CPUs: on a host with AVX-512 ``np.power`` and ``np.exp`` on float64 run
vectorised approximations that differ in the last bits from the AVX2 or baseline code another host
runs. A selector whose α and β are built from such values is then not bit-identical across
machines, and neither are its checkpoints. IEEE 754 fixes the result of ``+``, ``−``, ``×``,
``÷``, ``sqrt``, ``rint`` and ``ldexp`` (correctly rounded, whatever the vector width), and numpy
never fuses two ufunc calls into one fused multiply-add, so the functions here use only those:

- :func:`int_power`: ``base ** n`` for integer ``n ≥ 0`` by repeated squaring (within about n
  roundings of the exact power: each squaring doubles the relative error of what it squares;
  exact where the power is representable, as for 0.5 ** k);
- :func:`exp`: range reduction by ln 2 (Cody–Waite split, exact products) and a degree-13 Taylor
  polynomial on |r| ≤ ln 2 / 2, within 1 unit in the last place of libm's ``exp`` (checked over
  [−746, 710] in the tests).

Both are vectorised (a loop over the exponent's bits, a fixed-length polynomial), so they cost a
few numpy passes over the array."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ._validation import FloatArray

__all__ = ["int_power", "exp"]


def int_power(base: npt.ArrayLike, exponent: npt.ArrayLike) -> FloatArray:
    """``base ** exponent`` (float64, broadcast) for integer exponents ``≥ 0``, computed by
    repeated squaring: the same bits on every CPU. An exponent given as a float must be a whole
    number; ``0 ** 0`` is 1, as in IEEE ``pown``."""
    b = np.asarray(base, dtype=np.float64)
    e_in = np.asarray(exponent)
    if e_in.dtype.kind == "f":
        if not np.all(np.isfinite(e_in)) or np.any(e_in != np.floor(e_in)):
            raise ValueError("int_power: exponent must hold whole numbers")
    elif e_in.dtype.kind not in "iub":
        raise TypeError(f"int_power: exponent must be integers, got {e_in.dtype}")
    e = e_in.astype(np.int64)
    if e.size and int(e.min()) < 0:
        raise ValueError(f"int_power: exponent must be >= 0, got {int(e.min())}")
    b, e = np.broadcast_arrays(b, e)
    result = np.ones(b.shape, dtype=np.float64)
    square = b.copy()
    e = e.copy()
    while True:
        odd = (e & 1).astype(bool)
        result = np.where(odd, result * square, result)
        e >>= 1
        if not e.any():
            return result
        square = square * square


# ln 2 split so that k * _LN2_HI is exact for |k| < 2**11 (its low 32 bits are zero); fdlibm's.
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00
# Past these exp overflows to inf / underflows to 0 in float64.
_EXP_MAX = 709.782712893384
_EXP_MIN = -745.1332191019412
# 1/k! for k = 13..0, highest first (Horner); the Taylor remainder on |r| ≤ 0.347 is < 3e-18.
_TAYLOR = [1.0 / float(np.prod(np.arange(1, k + 1, dtype=np.float64))) for k in range(13, -1, -1)]


def exp(x: npt.ArrayLike) -> FloatArray:
    """e ** x (float64) from IEEE-exact operations only: the same bits on every CPU. NaN stays NaN,
    +inf gives inf and -inf gives 0."""
    x = np.asarray(x, dtype=np.float64)
    clipped = np.clip(np.nan_to_num(x, nan=0.0), _EXP_MIN - 1.0, _EXP_MAX + 1.0)
    k = np.rint(clipped * _INV_LN2)
    r = (clipped - k * _LN2_HI) - k * _LN2_LO
    poly = np.full(r.shape, _TAYLOR[0])
    for c in _TAYLOR[1:]:
        poly = poly * r + c
    # ldexp scales exactly, rounding once where the result is subnormal.
    with np.errstate(over="ignore"):  # past _EXP_MAX: inf, as exp gives
        out = np.ldexp(poly, k.astype(np.int64))
    out = np.where(x > _EXP_MAX, np.inf, out)
    out = np.where(x < _EXP_MIN, 0.0, out)
    return np.asarray(np.where(np.isnan(x), np.nan, out), dtype=np.float64)
