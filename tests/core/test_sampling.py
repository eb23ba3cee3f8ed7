"""The core's Beta sampler against scipy (Kolmogorov–Smirnov)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from bots_rft import _core

SHAPES = [0.3, 0.5, 1.0, 2.5, 40.0, 5000.0]


@pytest.mark.parametrize("a,b", list(itertools.product(SHAPES, SHAPES)))
def test_beta_draws_pass_ks(a: float, b: float) -> None:
    seed = int(a * 1000 + b)
    x = _core.beta_draws(a, b, 20_000, seed)
    assert np.all((x >= 0) & (x <= 1))
    # Fixed seeds: the test is deterministic; the threshold rejects a wrong distribution
    # (KS statistic ~0.01 or larger) while a correct sampler passes.
    result = stats.kstest(x, stats.beta(a, b).cdf)
    assert result.pvalue > 1e-3, (a, b, result)


def test_tiny_shapes_are_finite() -> None:
    x = _core.beta_draws(1e-3, 2e-3, 5000, 1)
    assert np.all(np.isfinite(x)) and np.all((x >= 0) & (x <= 1))
    assert np.mean(x > 0.5) == pytest.approx(1 / 3, abs=0.03)  # P(X > 1/2) -> a/(a+b) as a, b -> 0


def test_huge_shapes_concentrate() -> None:
    x = _core.beta_draws(3e6, 1e6, 5000, 2)
    assert abs(x.mean() - 0.75) < 1e-4
    assert x.std() == pytest.approx(np.sqrt(0.75 * 0.25 / 4e6), rel=0.1)
