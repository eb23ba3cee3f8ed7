"""The benchmark harness (benches/) runs and writes its reports, and its numpy and torch
implementations compute the same posterior as bots-rft. No timing assertions."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bots_rft import BOTS, Interpolation

BENCHES = Path(__file__).resolve().parents[2] / "benches"
sys.path.insert(0, str(BENCHES))

from impl_numpy import NumpyBOTS  # noqa: E402

pytestmark = pytest.mark.slow

HAVE_TORCH = importlib.util.find_spec("torch") is not None
N, B = 5000, 256


def references(seed: int = 7) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reference pass rates with NaNs, rounded to float32 (the core may store them so), and
    true rates to draw successes from."""
    rng = np.random.default_rng(seed)
    q = rng.random(N)
    weak = (q * q).astype(np.float32)
    strong = np.sqrt(q).astype(np.float32)
    weak[rng.random(N) < 0.1] = np.nan
    strong[rng.random(N) < 0.1] = np.nan
    return weak.astype(np.float64), strong.astype(np.float64), q


def test_harness_quick_run_writes_reports(tmp_path: Path) -> None:
    impls = "bots-rft,numpy,torch" if HAVE_TORCH else "bots-rft,numpy"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCHES / "run.py"),
            "--quick",
            "--sizes",
            "5000",
            "--impls",
            impls,
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for name in ("bench.md", "bench.json", "bench.png"):
        assert (tmp_path / name).stat().st_size > 0, name
    data = json.loads((tmp_path / "bench.json").read_text())
    got = {(r["impl"], r["threads"]) for r in data["results"]}
    assert ("bots-rft", 1) in got and ("bots-rft", 2) in got and ("numpy", 1) in got
    for r in data["results"]:
        assert r["num_tasks"] == 5000
        # step_cold: the step after a sweep that evicts the caches (the interleaved, cold-cache mode).
        assert set(r["median_ms"]) == {"update", "select", "step", "step_cold"}
        assert r["cold_sweep_bytes"] >= 64 << 20
        assert r["state_bytes_per_task"] > 0
    md = (tmp_path / "bench.md").read_text()
    assert "| 5,000 | bots-rft | 1 |" in md and "floor" in md and "numpy ÷ this, cold" in md
    # The per-stage and critical-path parts ran (no timings asserted, only that they were made).
    (st,) = data["stages"]
    assert st["num_tasks"] == 5000 and st["auto_backend"] in st["backends"]
    for b in st["backends"].values():
        assert set(b["ns_per_task"]) >= {"update", "draw", "greedy_select", "thompson_select"}
    (cp,) = data["critical_path"]
    assert "skipped" not in cp and cp["identical_selections"] is True  # prefetch on/off select the same tasks
    # update(); select() back to back, both modes, the same selections.
    assert cp["identical_back_to_back"] is True
    assert all(cp["modes"][m]["back_to_back"]["step_ms"]["runs"] > 0 for m in ("prefetch", "sync"))
    assert {t["k"] for t in cp["take"]} == {1, 16}
    # The trivial call is timed within the prefetch loop's steps, as many times as the waits.
    assert cp["wake_ms"]["runs"] == cp["modes"]["prefetch"]["select_wait_ms"]["runs"]
    assert "| wait ÷ trivial |" in md
    assert "## Per-stage cost on one core" in md and "## What the trainer waits for" in md


@pytest.mark.parametrize("threads", [1, 2])
def test_numpy_update_matches_bots_rft(threads: int) -> None:
    weak, strong, q = references()
    rng = np.random.default_rng(3)
    sel = BOTS(N, evidence=Interpolation(weak, strong), threads=threads, seed=1)
    ref = NumpyBOTS(weak, strong, seed=1)
    for step in range(4):
        ids = sel.select(B)
        ids = np.concatenate([ids, ids[:5]])  # repeated ids: their counts are summed
        succ = rng.binomial(16, q[ids]).astype(np.float64)
        sel.update(ids, succ, 16)
        ref.update(ids, succ, 16)
        sel.flush()
        np.testing.assert_allclose(sel.alpha, ref.alpha, rtol=1e-6, err_msg=f"alpha after step {step}")
        np.testing.assert_allclose(sel.beta, ref.beta, rtol=1e-6, err_msg=f"beta after step {step}")
        assert ref.capability is not None and sel.capability == pytest.approx(ref.capability, rel=1e-6)


def test_numpy_select_returns_distinct_best_first() -> None:
    weak, strong, _ = references()
    ref = NumpyBOTS(weak, strong, seed=0)
    ids = ref.select(B)
    assert len(ids) == B and len(set(ids.tolist())) == B
    # Greedy check of the ordering: re-draw with the same stream and compare keys.
    p = np.random.default_rng(0).beta(ref.alpha, ref.beta)
    key = np.abs(p - 0.5)
    assert np.all(np.diff(key[ids]) >= 0)
    assert key[ids].max() <= np.sort(key)[B - 1]


@pytest.mark.skipif(not HAVE_TORCH, reason="torch not installed")
def test_torch_update_matches_numpy() -> None:
    from impl_torch import TorchBOTS

    weak, strong, q = references()
    rng = np.random.default_rng(5)
    ref = NumpyBOTS(weak, strong)
    tor = TorchBOTS(weak, strong)
    ids = ref.select(B)
    for _ in range(3):
        succ = rng.binomial(16, q[ids]).astype(np.float64)
        ref.update(ids, succ, 16)
        tor.update(ids, succ, 16)
        np.testing.assert_allclose(tor.alpha, ref.alpha, rtol=1e-12)
        np.testing.assert_allclose(tor.beta, ref.beta, rtol=1e-12)
        ids = tor.select(B)
        assert len(set(ids.tolist())) == B


def test_refeval_bench_compares_plain_generate_with_every_engine(tmp_path: Path) -> None:
    """benches/refeval_speed.py on the tiny model: every variant measured, ratios against the plain
    generate of the same repetition, and one end-to-end refeval per engine (no timings asserted)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    stem = tmp_path / "refeval_speed"
    proc = subprocess.run(
        [sys.executable, str(BENCHES / "refeval_speed.py"), "--model", "tiny", "--tasks", "4", "--reps", "2",
         "--max-new-tokens", "6", "--out", str(stem)],
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(stem.with_suffix(".json").read_text())
    assert {r["variant"] for r in data["runs"]} == {"generate", "refeval fast", "refeval speculative", "refeval hf"}
    assert len(data["runs"]) == 8 and all(r["tokens"] > 0 for r in data["runs"])
    assert data["summary"]["generate"]["ratio"] == pytest.approx(1.0)
    assert set(data["end_to_end"]) == {"fast", "speculative", "hf"}
    assert all(v["tokens"] > 0 for v in data["end_to_end"].values())
    assert "÷ plain generate" in stem.with_suffix(".md").read_text()


def test_the_estimator_bench_quick_run_writes_its_report(tmp_path: Path) -> None:
    """benches/estimators.py (make bench): bots-embed's update beside the selector's step."""
    proc = subprocess.run(
        [sys.executable, str(BENCHES / "estimators.py"), "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads((tmp_path / "estimators.json").read_text())
    assert [r["dim"] for r in data["rows"]] == [64, 256]
    for r in data["rows"]:
        assert r["fit_s"] > 0 and r["predict_s"] > 0 and r["bots_embed_step_s"] > 0
    assert "| tasks | d |" in (tmp_path / "estimators.md").read_text()
