"""The torch backend's random variates: Thompson draws (exact Beta variates) and the softmax
rule's Gumbel keys, as functions of (seed, selection count, task index) only, on any device.

They use the CPU core's counter-based scheme: task j's k-th try at a draw takes the four 32-bit
words of Philox4x32-10 at counter (j, selection count, k) under a key derived from the seed and
the selection count, exactly as the core derives it, so the uniforms are the core's, bit for bit,
and nothing depends on how the work is split into launches or chunks. The transcendental functions
are torch's (the core uses its own float32 polynomials), so a draw can differ from the core's in
the last bits; an attempt whose acceptance test falls within that rounding of its threshold can
be decided differently, and that task's draw then comes from the next try. Both are exact Beta
variates.

One try for Beta(a, b) with a, b >= 1: a Box–Muller pair of normals from words 0 and 1 and a
Marsaglia–Tsang attempt in float32 for each of Gamma(a) (uniform from word 2) and Gamma(b) (word
3); accepted when both attempts are, then x / (x + y) (formed in float64, rounded to float32 once). A rejected try is redrawn as a unit with
the next k, which keeps accepted tries exact. A shape below 1 uses the boost
Gamma(s) = Gamma(s + 1) · U^(1/s) with U from the words at the reserved slot ``BOOST_ATTEMPT``
(the core uses a scalar float64 sampler there instead), carried in log space.

Integers are held in int64 tensors with values in [0, 2^32); every product stays below 2^63, so
the arithmetic is exact on every device.
"""

from __future__ import annotations

import math

import torch

MASK32 = 0xFFFF_FFFF
_MASK64 = 0xFFFF_FFFF_FFFF_FFFF
_PHILOX_M0 = 0xD251_1F53
_PHILOX_M1 = 0xCD9E_8D57
_PHILOX_W0 = 0x9E37_79B9
_PHILOX_W1 = 0xBB67_AE85
_GOLDEN = 0x9E37_79B9_7F4A_7C15

#: The Philox "attempt" slot of a task's Gumbel variate (the core's slot).
GUMBEL_ATTEMPT = 0xFFFF
#: The slot of the boost uniforms of shapes below 1 (unused by the core's vector path).
BOOST_ATTEMPT = 0xFFFE
#: Shapes are clamped to this before the float32 draw: Beta draws with a shape this large are 0
#: or 1 to float32 precision anyway, and the clamp keeps x + y finite.
MAX_SHAPE = 1e30


# ------------------------------------------------------------------------------- keys (host)
def _splitmix64(state: int) -> tuple[int, int]:
    state = (state + _GOLDEN) & _MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58_476D_1CE4_E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D0_49BB_1331_11EB) & _MASK64
    return state, z ^ (z >> 31)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK64


def philox_key(seed: int, counter: int) -> tuple[int, int]:
    """The Philox key of every draw of selection ``(seed, counter)``: the first output of the
    core's xoshiro256++ stream for (seed, counter, 2^64 − 1), split into two 32-bit words."""
    index = _MASK64

    def mix(x: int) -> int:
        return _splitmix64(x)[1]

    k = mix(mix(mix(seed) ^ ((counter * _GOLDEN) & _MASK64)) ^ ((index * 0xD1B5_4A32_D192_ED03) & _MASK64))
    s = []
    state = k
    for _ in range(4):
        state, out = _splitmix64(state)
        s.append(out)
    first = (_rotl((s[0] + s[3]) & _MASK64, 23) + s[0]) & _MASK64
    return first & MASK32, first >> 32


# ------------------------------------------------------------------------------- Philox (device)
def _mulhilo(m: int, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(high, low) 32-bit words of m·c for a 32-bit constant m, exactly, in int64: m is split
    into 16-bit halves so that no partial product reaches 2^63."""
    u = c * (m >> 16)
    t = c * (m & 0xFFFF)
    hi = (u + (t >> 16)) >> 16
    lo = (((u & 0xFFFF) << 16) + t) & MASK32
    return hi, lo


def philox4x32(
    c: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], key: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Philox4x32-10 (Salmon et al., SC'11) on int64 tensors holding 32-bit words."""
    c0, c1, c2, c3 = c
    k0, k1 = key
    for r in range(10):
        hi0, lo0 = _mulhilo(_PHILOX_M0, c0)
        hi1, lo1 = _mulhilo(_PHILOX_M1, c2)
        rk0 = (k0 + _PHILOX_W0 * r) & MASK32
        rk1 = (k1 + _PHILOX_W1 * r) & MASK32
        c0, c1, c2, c3 = hi1 ^ c1 ^ rk0, lo1, hi0 ^ c3 ^ rk1, lo0
    return c0, c1, c2, c3


def task_words(
    j: torch.Tensor, counter: int, attempt: int, key: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The four Philox words of tasks ``j`` (int64 global indices) at try ``attempt`` of
    selection ``counter``: counter block (j, counter, counter >> 32, j >> 32 | attempt << 16),
    the core's layout (pools up to 2^48 tasks)."""
    c0 = j & MASK32
    c1 = torch.full_like(j, counter & MASK32)
    c2 = torch.full_like(j, (counter >> 32) & MASK32)
    c3 = (j >> 32) | (attempt << 16)
    return philox4x32((c0, c1, c2, c3), key)


def open01(bits: torch.Tensor) -> torch.Tensor:
    """A float32 uniform on (0, 1) from the top 24 bits of a word (the core's conversion)."""
    return ((bits >> 8).to(torch.float32) + 0.5) * (1.0 / 16_777_216.0)


# ------------------------------------------------------------------------------- Beta draws
def _gamma_attempt(shape: torch.Tensor, z: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One Marsaglia–Tsang attempt in float32 for shape >= 1: the candidate d·v³ and whether it
    is accepted (v > 0, and the squeeze or the exact log test)."""
    d = shape - (1.0 / 3.0)
    c = torch.rsqrt(9.0 * d)
    v = 1.0 + c * z
    v3 = v * v * v
    z2 = z * z
    squeeze = u < 1.0 - 0.0331 * z2 * z2
    log_test = torch.log(u) < 0.5 * z2 + d * (1.0 - v3 + torch.log(v3.clamp_min(torch.finfo(torch.float32).tiny)))
    return d * v3, (v > 0.0) & (squeeze | log_test)


def _beta_try(
    sa: torch.Tensor, sb: torch.Tensor, j: torch.Tensor, counter: int, attempt: int, key: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One try at Beta draws for tasks ``j`` with (boosted) float32 shapes ``sa``, ``sb`` >= 1:
    the two gamma candidates and whether the try was accepted."""
    w0, w1, w2, w3 = task_words(j, counter, attempt, key)
    r = torch.sqrt(-2.0 * torch.log(open01(w0)))
    angle = open01(w1) * (2.0 * math.pi)
    gx, okx = _gamma_attempt(sa, r * torch.cos(angle), open01(w2))
    gy, oky = _gamma_attempt(sb, r * torch.sin(angle), open01(w3))
    return gx, gy, okx & oky


def thompson_draws(alpha: torch.Tensor, beta: torch.Tensor, j: torch.Tensor, seed: int, counter: int) -> torch.Tensor:
    """float32 Beta(α, β) draws of selection ``(seed, counter)`` for the tasks with global
    indices ``j`` (int64, one per element of ``alpha``; shapes must be finite and > 0)."""
    key = philox_key(seed, counter)
    sa = alpha.to(torch.float32).clamp(max=MAX_SHAPE)
    sb = beta.to(torch.float32).clamp(max=MAX_SHAPE)
    small_a, small_b = sa < 1.0, sb < 1.0
    ta = torch.where(small_a, sa + 1.0, sa)
    tb = torch.where(small_b, sb + 1.0, sb)
    gx, gy, ok = _beta_try(ta, tb, j, counter, 0, key)
    # Rejected tries are redrawn, compacted, with the next attempt index until every task is
    # accepted (each try succeeds with probability above 0.9).
    pending = torch.nonzero(~ok).squeeze(1)
    attempt = 1
    while pending.numel() > 0:
        px, py, pok = _beta_try(ta[pending], tb[pending], j[pending], counter, attempt, key)
        gx[pending] = px
        gy[pending] = py
        pending = pending[~pok]
        attempt += 1
    # The ratio formed in float64 and rounded to float32 once, as the core forms it: in float32 the
    # sum is rounded first, and for a large shape the draws land on a grid that aliases against
    # float32's (Beta(1e6, 1) leaves every 21st value below 1 nearly empty).
    draws = (gx.double() / (gx.double() + gy.double())).to(torch.float32)
    boosted = torch.nonzero(small_a | small_b).squeeze(1)
    if boosted.numel() > 0:
        u0, u1, _, _ = task_words(j[boosted], counter, BOOST_ATTEMPT, key)
        lx = torch.log(gx[boosted]) + torch.where(small_a[boosted], torch.log(open01(u0)) / sa[boosted], 0.0)
        ly = torch.log(gy[boosted]) + torch.where(small_b[boosted], torch.log(open01(u1)) / sb[boosted], 0.0)
        draws[boosted] = 1.0 / (1.0 + torch.exp(ly - lx))
    return draws


def gumbel_keys(j: torch.Tensor, seed: int, counter: int) -> torch.Tensor:
    """float64 Gumbel(0, 1) variates of selection ``(seed, counter)`` for the tasks with global
    indices ``j``: −ln(−ln u), u from 53 bits of the task's words at ``GUMBEL_ATTEMPT`` (the
    core's variates, up to the rounding of the logarithms)."""
    key = philox_key(seed, counter)
    w0, w1, _, _ = task_words(j, counter, GUMBEL_ATTEMPT, key)
    bits = (w0 << 21) | (w1 >> 11)
    u = (bits.to(torch.float64) + 0.5) * (1.0 / float(1 << 53))
    return -torch.log(-torch.log(u))
