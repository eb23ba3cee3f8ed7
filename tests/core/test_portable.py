"""The CPU-independent arithmetic (``bots_rft._portable``): accurate against libm, exact where the
answer is representable, and the same bits under every numpy SIMD level this host supports."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bots_rft._portable import exp, int_power
from numpy_levels import Level, level_env, levels


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return np.abs(got - want) / np.spacing(np.abs(want))


def test_exp_is_within_one_ulp_of_libm_over_the_whole_range() -> None:
    x = np.concatenate([np.linspace(-708.0, 709.7, 100_001), np.random.default_rng(0).normal(0, 3, 50_000)])
    want = np.array([math.exp(v) for v in x])
    assert _ulps(exp(x), want).max() <= 1.0


def test_exp_edges() -> None:
    got = exp([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, 710.0, -746.0, -745.0])
    assert np.isnan(got[0])
    assert got[1] == np.inf and got[2] == 0.0 and got[3] == 1.0 and got[4] == 1.0
    assert abs(got[5] - math.e) <= np.spacing(math.e)
    assert got[6] == np.inf and got[7] == 0.0
    assert 0.0 < got[8] == math.exp(-745.0)  # the smallest subnormal


@given(st.floats(0.0, 1.0), st.integers(0, 400))
def test_int_power_matches_libm_pow(base: float, n: int) -> None:
    got = float(int_power(base, n))
    want = math.pow(base, n)
    # Each squaring doubles the relative error of what it squares: base**n is within about n
    # roundings of the exact power (1e-14 relative at n = 100, where libm's pow is within one).
    assert abs(got - want) <= max(1, n) * 2.0**-52 * want + 1e-300


def test_int_power_is_exact_where_the_answer_is_representable() -> None:
    assert int_power(0.5, np.arange(60)).tolist() == [0.5**k for k in range(60)]
    assert int_power(3.0, np.arange(30)).tolist() == [float(3**k) for k in range(30)]
    assert int_power([0.0, 0.0, 2.0], [0, 3, 10]).tolist() == [1.0, 0.0, 1024.0]
    assert int_power(0.8, np.array([2.0, 5.0])).tolist() == [0.8 * 0.8, float(int_power(0.8, 5))]


def test_int_power_refuses_what_is_not_a_whole_exponent() -> None:
    with pytest.raises(ValueError, match="whole numbers"):
        int_power(0.5, 1.5)
    with pytest.raises(ValueError, match=">= 0"):
        int_power(0.5, [-1, 2])
    with pytest.raises(TypeError, match="integers"):
        int_power(0.5, np.array(["1"]))


# What each level must reproduce bit for bit: the two functions, the lag weighting and the
# similarity estimator's spread (the values that reach α and β).
_PROBE = """
import hashlib, numpy as np
from bots_rft._portable import exp, int_power
from bots_rft.selector.bots.rules import lag_weighted
from bots_rft.metrics import effective_probability
from bots_rft.selector.plan import informative_probability
rng = np.random.default_rng(5)
x = rng.normal(0, 20, 100_000)
base = rng.random(100_000)
lag = rng.integers(0, 300, 100_000)
s, t = lag_weighted(rng.random(100_000) * 8, np.full(100_000, 8.0), lag, 100_000, 0.93)
parts = [exp(x), int_power(base, lag), s, t, effective_probability(base, 8), informative_probability(base, lag)]
print(hashlib.sha256(b"".join(np.ascontiguousarray(p).tobytes() for p in parts)).hexdigest())
"""

_LEVELS = levels()


def _digest(level: Level) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE],
        env=level_env(level),
        capture_output=True,
        text=True,
        cwd=Path(__file__).parents[2],
        check=True,
    )
    return done.stdout.strip()


@pytest.mark.skipif(len(_LEVELS) < 2, reason="numpy dispatches to one level only on this host")
def test_the_same_bits_under_every_numpy_level() -> None:
    digests = {lv.name: _digest(lv) for lv in _LEVELS}
    assert len(set(digests.values())) == 1, digests
