"""Every SIMD path of the vectorised Thompson sampler (each SIMD width and the portable
fallback) draws from the right distribution and selects identically. (Here "backend" means where
BOTS keeps its posterior, not the SIMD path; the core's old names for the SIMD path remain as
deprecated aliases, checked at the end.)"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from scipy import stats

from bots_rft import BOTS, Interpolation, _core

SIMD_PATHS = _core.available_simd_paths()
SHAPES = [0.3, 0.5, 1.0, 2.5, 40.0, 5000.0]


@pytest.fixture
def forced_simd_path():  # type: ignore[no-untyped-def]
    yield _core.set_simd_path
    _core.set_simd_path(None)


def test_portable_simd_path_always_exists() -> None:
    assert "portable" in SIMD_PATHS
    assert _core.simd_path() in SIMD_PATHS


def ks_pvalue_below(draws: np.ndarray, cdf, upper: float) -> float:  # type: ignore[no-untyped-def]
    """Kolmogorov–Smirnov p-value with the supremum taken over x < ``upper`` only.

    Draws are float32, whose spacing just below 1 is 6e-8: Beta(5000, 0.3) puts several percent
    of its mass within that spacing of 1, where the rounded draws tie and a plain KS test sees the
    rounding, not the sampler. Below ``upper`` = 1 - 1e-6 rounding is invisible. A supremum over a
    subset is at most the full one, so the usual KS p-value stays valid (conservative).
    """
    x = np.sort(draws.astype(np.float64))
    n = len(x)
    keep = x < upper
    f = cdf(x[keep])
    i = np.flatnonzero(keep)
    d = max(np.max((i + 1) / n - f, initial=0.0), np.max(f - i / n, initial=0.0))
    return float(stats.kstwo.sf(d, n))


@pytest.mark.parametrize("simd_path", SIMD_PATHS)
@pytest.mark.parametrize("a,b", list(itertools.product(SHAPES, SHAPES)))
def test_thompson_draws_pass_ks(simd_path: str, a: float, b: float) -> None:
    n = 20_000
    draws = _core.thompson_draws(np.full(n, a), np.full(n, b), seed=int(a * 100 + b), counter=3, simd_path=simd_path)
    assert draws.dtype == np.float32 and np.all((draws >= 0) & (draws <= 1))
    p = ks_pvalue_below(draws, stats.beta(a, b).cdf, upper=1 - 1e-6)
    assert p > 1e-3, (simd_path, a, b, p)
    # The mass within float32 rounding of 1 matches the distribution too.
    top = float(np.mean(draws >= np.float32(1 - 1e-6)))
    expected = float(stats.beta(a, b).sf(1 - 1e-6))
    assert abs(top - expected) < 5 * np.sqrt(expected * (1 - expected) / n) + 1e-3, (top, expected)


def test_all_simd_paths_draw_identical_bits() -> None:
    rng = np.random.default_rng(0)
    n = 3 * _core.CHUNK + 17
    alpha = np.where(rng.random(n) < 0.05, rng.uniform(0.1, 1, n), rng.uniform(1, 200, n))
    beta = rng.uniform(0.5, 200, n)
    ref = _core.thompson_draws(alpha, beta, 5, 9, simd_path="portable")
    for simd_path in SIMD_PATHS:
        np.testing.assert_array_equal(
            _core.thompson_draws(alpha, beta, 5, 9, simd_path=simd_path).view(np.uint32), ref.view(np.uint32)
        )
    # and independent of the thread count
    np.testing.assert_array_equal(
        _core.thompson_draws(alpha, beta, 5, 9, threads=1), _core.thompson_draws(alpha, beta, 5, 9, threads=2)
    )


def test_selection_uses_the_same_draws() -> None:
    """select() picks the B tasks nearest the target among exactly the draws thompson_draws shows."""
    rng = np.random.default_rng(1)
    n = 50_000
    alpha, beta = rng.uniform(1, 30, n), rng.uniform(1, 30, n)
    sel = BOTS(n, prior_alpha=alpha, prior_beta=beta, seed=21)
    draws = _core.thompson_draws(alpha, beta, 21, 0).astype(np.float64)
    key = np.abs(draws.astype(np.float32) - np.float32(0.5)).astype(np.float64)
    want = np.lexsort((np.arange(n), key))[:256]
    np.testing.assert_array_equal(sel.select(256), want)


@pytest.mark.parametrize("simd_path", SIMD_PATHS)
def test_selection_and_updates_identical_on_every_simd_path(simd_path: str, forced_simd_path) -> None:  # type: ignore[no-untyped-def]
    n = 20 * _core.CHUNK + 3
    rng = np.random.default_rng(2)
    weak = rng.binomial(16, rng.random(n)) / 16
    strong = np.clip(weak + 0.25, 0, 1)

    def run() -> tuple[list[np.ndarray], np.ndarray]:
        sel = BOTS(n, evidence=Interpolation(weak, strong), seed=4)
        out_rng = np.random.default_rng(3)
        picks = []
        for _ in range(5):
            ids = sel.select(256)
            picks.append(ids)
            sel.update(ids, out_rng.binomial(16, 0.5, 256), 16)
        return picks, sel.alpha.copy()

    forced_simd_path("portable")
    ref_picks, ref_alpha = run()
    forced_simd_path(simd_path)
    picks, alpha = run()
    for p, q in zip(picks, ref_picks):
        np.testing.assert_array_equal(p, q)
    np.testing.assert_array_equal(alpha, ref_alpha)


def test_unknown_simd_path_is_refused() -> None:
    from bots_rft import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="simd_path") as info:
        _core.set_simd_path("sse9")
    assert info.value.argument == "simd_path"
    with pytest.raises(InvalidArgumentError, match="simd_path") as info:
        _core.thompson_draws(np.ones(3), np.ones(3), 1, 0, simd_path="sse9")
    assert info.value.argument == "simd_path"


@pytest.mark.parametrize(
    "old,new,args",
    [
        ("available_backends", "available_simd_paths", ()),
        ("backend", "simd_path", ()),
        ("set_backend", "set_simd_path", ("portable",)),
        ("set_backend", "set_simd_path", (None,)),
    ],
)
def test_old_names_are_deprecated_aliases(old: str, new: str, args: tuple[str | None, ...], forced_simd_path) -> None:  # type: ignore[no-untyped-def]
    """The core's names from before "backend" came to mean only where BOTS keeps its posterior
    still work: each warns (a DeprecationWarning naming its replacement, attributed to the
    caller's line) and does what the new name does."""
    with pytest.warns(DeprecationWarning, match=rf"_core\.{old}\(\) is deprecated; use {new}\(\)") as caught:
        got = getattr(_core, old)(*args)
    assert [w.filename for w in caught] == [__file__]
    if old == "set_backend":
        assert _core.simd_path() == (args[0] or SIMD_PATHS[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new name does not warn
        assert got == getattr(_core, new)(*args)


def test_deprecated_set_backend_refuses_like_set_simd_path() -> None:
    from bots_rft import InvalidArgumentError

    with pytest.warns(DeprecationWarning), pytest.raises(InvalidArgumentError, match="simd_path"):
        _core.set_backend("sse9")
