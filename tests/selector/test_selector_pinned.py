"""Every selector backend's results pinned: a fixed scenario of selections and updates (plain,
MoPPS, adaptive ρ and λ, policy lag, reward mapping, plan, the task stream, a checkpoint round
trip) run on the Rust backend, the torch backend on CPU and the Ray-sharded selector, with a
SHA-256 of each step's picks and of the final posterior and state compared with pinned digests
(tests/data/selector_pinned.json). Restructuring the selectors must not change what they pick or
what they store.

The digests cover the picked task ids, the posterior (α, β as float64 bytes) and the state dict's
arrays and scalars (not a file's bytes: the checkpoint format may change, its content may not).

``test_pins_hold_under_each_numpy_level`` reruns them (Rust and torch backends) in a fresh process
per numpy SIMD level the host supports (``NPY_DISABLE_CPU_FEATURES``, down to the baseline), and
``test_torch_backend_pins_hold_under_each_instruction_set`` the torch backend's per ATen
instruction set (``ATEN_CPU_CAPABILITY``), so a value that depends on one CPU's kernels fails on
the machine that has them.

Regenerate (only when a change of results is intended): ``python tests/selector/test_selector_pinned.py``."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bots_rft import BOTS, Interpolation
from numpy_levels import Level, check_expected, level_env, levels
from torch_levels import ISA_LADDER, isa_env, skip_reason
from torch_levels import check_expected as check_expected_isa

PINNED = Path(__file__).parents[1] / "data" / "selector_pinned.json"
N = 2_000
B = 32


def _refs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    weak = rng.beta(0.6, 0.9, N)
    strong = np.clip(weak + rng.uniform(0, 0.4, N), 0, 1)
    return weak, strong


SCENARIOS: dict[str, dict[str, Any]] = {
    "bots": dict(),
    "bots-no-thompson": dict(thompson=False),
    "mopps": dict(evidence=None, lam=0.0),
    "adaptive": dict(adaptive_rho=True, adaptive_lam=True, tau=0.1),
    "lagged": dict(lag_discount=0.8),
}


def _digest(h: Any, value: Any) -> None:
    if isinstance(value, dict):
        for key in sorted(value):
            h.update(str(key).encode())
            _digest(h, value[key])
    elif isinstance(value, (list, tuple)):
        h.update(b"[")
        for v in value:
            _digest(h, v)
        h.update(b"]")
    elif isinstance(value, np.ndarray):
        h.update(str(value.dtype).encode() + str(value.shape).encode())
        h.update(np.ascontiguousarray(value).tobytes())
    elif hasattr(value, "state_dict") and not isinstance(value, type):
        _digest(h, value.state_dict())
    else:
        h.update(repr(value).encode())


def _hex(value: Any) -> str:
    h = hashlib.sha256()
    _digest(h, value)
    return h.hexdigest()[:24]


def _make(kind: str, kwargs: dict[str, Any]) -> Any:
    kwargs = dict(kwargs)
    if "evidence" not in kwargs:
        kwargs["evidence"] = Interpolation(*_refs())
    if kind == "rust":
        return BOTS(N, seed=3, **kwargs)
    if kind == "torch":
        return BOTS(N, seed=3, backend="torch", device="cpu", **kwargs)
    if kind == "sharded":
        from bots_rft.integrations.ray import ShardedBOTS

        return ShardedBOTS(N, shards=3, seed=3, actor_options={"num_cpus": 0}, prefetch=False, **kwargs)
    raise AssertionError(kind)


def run_scenario(kind: str, name: str, tmp: Path) -> dict[str, Any]:
    """What the scenario produced, as digests: one per step's picks, then the posterior and the
    state after a checkpoint round trip."""
    s = _make(kind, SCENARIOS[name])
    rng = np.random.default_rng(11)
    p_true = rng.beta(0.7, 0.7, N)
    out: dict[str, Any] = {"picks": []}
    for step in range(6):
        ids = np.asarray(s.select(B))
        out["picks"].append(_hex(ids))
        trials = 8
        succ = rng.binomial(trials, p_true[ids]).astype(np.float64)
        if name == "lagged":
            s.update(ids, succ, trials, policy_lag=np.arange(B) % 3)
        elif step % 2 == 1:
            rewards = (rng.random((B, trials)) < p_true[ids, None]).astype(np.float64)
            s.update_rewards(ids, rewards)
        else:
            s.update(ids, succ, trials)
    if kind == "rust" and name == "bots":
        plan = s.plan(256, 4, 16)
        out["plan"] = _hex([np.asarray(x) for x in plan])
        got = s.take(10)
        s.release(got[:3])
        out["take"] = _hex([np.asarray(got), np.asarray(s.in_flight)])
    path = tmp / f"{kind}-{name}.ckpt"
    s.save(path)
    loaded = BOTS.load(path) if kind != "sharded" else type(s).load(path, shards=2, actor_options={"num_cpus": 0})
    state = loaded.state_dict()
    # "identity" (the evidence's and pool's fingerprints, added after these pins) is pinned by
    # tests/selector/test_selector_identity.py; everything pinned here before stays pinned.
    out["state"] = _hex({k: v for k, v in state.items() if k not in ("threads", "identity")})
    alpha, beta = loaded.posterior(np.arange(N))
    out["posterior"] = _hex([np.asarray(alpha, np.float64), np.asarray(beta, np.float64)])
    out["next"] = _hex(np.asarray(loaded.select(B)))
    for sel in (s, loaded):
        close = getattr(sel, "close", None)
        if close is not None:
            close()
    return out


CASES = [("rust", n) for n in SCENARIOS] + [("torch", n) for n in SCENARIOS] + [("sharded", "bots")]


def _pins() -> dict[str, Any]:
    return json.loads(PINNED.read_text())


@pytest.mark.parametrize(
    "kind,name",
    # The sharded case starts a Ray instance: in the slow tier.
    [pytest.param(k, n, marks=[pytest.mark.slow] if k == "sharded" else []) for k, n in CASES],
    ids=[f"{k}-{n}" for k, n in CASES],
)
def test_selector_results_are_the_pinned_ones(kind: str, name: str, tmp_path: Path) -> None:
    check_expected()
    if kind == "torch":
        check_expected_isa()
    if kind == "torch":
        pytest.importorskip("torch")
    if kind != "sharded":
        assert run_scenario(kind, name, tmp_path) == _pins()[f"{kind}-{name}"]
        return
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        assert run_scenario(kind, name, tmp_path) == _pins()[f"{kind}-{name}"]
    finally:
        if started:  # leave Ray as it was: later tests start their own instance
            ray.shutdown()


_LEVELS = levels()


@pytest.mark.slow
@pytest.mark.parametrize("level", _LEVELS, ids=[lv.name for lv in _LEVELS])
def test_pins_hold_under_each_numpy_level(level: Level) -> None:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", __file__]
    cmd += ["-k", "results_are_the_pinned and not sharded"]
    done = subprocess.run(cmd, env=level_env(level), capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert done.returncode == 0, (
        f"pinned selectors with NPY_DISABLE_CPU_FEATURES={level.disable!r}:\n{done.stdout[-6000:]}"
    )
    expected = len([c for c in CASES if c[0] != "sharded"])
    assert f"{expected} passed" in done.stdout, done.stdout[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("isa", ISA_LADDER)
def test_torch_backend_pins_hold_under_each_instruction_set(isa: str) -> None:
    """The torch backend's CPU path (its draws use torch's vectorised log/exp) under each ATen
    instruction set this host supports."""
    pytest.importorskip("torch")
    reason = skip_reason(isa)
    if reason:
        pytest.skip(reason)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", __file__]
    cmd += ["-k", "results_are_the_pinned and torch"]
    done = subprocess.run(cmd, env=isa_env(isa), capture_output=True, text=True, cwd=Path(__file__).parents[2])
    assert done.returncode == 0, f"pinned torch selectors under ATEN_CPU_CAPABILITY={isa}:\n{done.stdout[-6000:]}"
    assert f"{len([c for c in CASES if c[0] == 'torch'])} passed" in done.stdout, done.stdout[-2000:]


if __name__ == "__main__":  # regenerate the pins
    import tempfile

    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    pins = {}
    with tempfile.TemporaryDirectory() as d:
        for kind, name in CASES:
            pins[f"{kind}-{name}"] = run_scenario(kind, name, Path(d))
            print(kind, name, file=sys.stderr)
    PINNED.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n")
