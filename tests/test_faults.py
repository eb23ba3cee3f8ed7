"""Faults a training run must survive or report: verifiers that raise, exit, hang, crash their
worker or return something that is not a reward; a worker killed mid-batch; temporary files left
by killed workers; a trainer killed (SIGKILL) or stopped (SIGTERM) mid-run and resumed; a pool
that changed under a resumed run; corrupt checkpoint files; malformed pools."""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bots_rft.errors import InvalidArgumentError
from bots_rft.rewards import RewardItem, RewardResult, RewardScorer, register_verifier, score_one
from bots_rft.rewards.base import coerce_result

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


# ----------------------------------------------------------------- verifiers (module level:
# the scorer's worker processes import them by name)
def returning(data_source: str, response: str, ground_truth: Any, extra_info: Mapping[str, Any]) -> Any:
    """Returns what ``response`` names (``extra_info`` can't carry non-JSON values)."""
    values: dict[str, Any] = {
        "str": "1.0", "none": None, "nan": math.nan, "inf": math.inf, "-inf": -math.inf, "1.5": 1.5, "-1": -1,
        "complex": complex(1, 0), "ndarray": np.array(1.0), "list": [1.0], "dict": {"reward": 1},
        "nan_result": RewardResult(math.nan), "true": True, "false": False, "f32": np.float32(0.5),
        "fraction": Fraction(1, 4), "int": 1, "half": 0.5,
    }  # fmt: skip
    if response == "tensor":
        import torch

        return torch.tensor(1.0)
    return values[response]


def misbehaving(data_source: str, response: str, ground_truth: Any, extra_info: Mapping[str, Any]) -> Any:
    if response == "raise":
        raise RuntimeError("verifier bug")
    if response == "exit0":
        raise SystemExit(0)
    if response == "ctrl-c":
        raise KeyboardInterrupt
    if response == "os-exit":
        os._exit(3)
    if response == "hang":
        time.sleep(600)
    if response == "hang-with-file":
        # What a sandbox leaves while it runs: a temporary work file, then a stuck child.
        fd, path = tempfile.mkstemp(prefix="answer-")
        os.write(fd, b"x" * 1024)
        Path(str(ground_truth)).write_text(str(os.getpid()))
        time.sleep(600)
    if response == "slow":
        time.sleep(0.2)
    if response == "string":
        return "1.0"
    return 1.0


@pytest.fixture(scope="module", autouse=True)
def _verifiers() -> None:
    register_verifier("faults_return", returning)
    register_verifier("faults_misbehave", misbehaving)


# ---------------------------------------------------------------------- return values
ERRORS = ["str", "none", "nan", "inf", "-inf", "1.5", "-1", "complex", "ndarray", "list", "dict", "nan_result"]
REWARDS = {"true": 1.0, "false": 0.0, "f32": 0.5, "fraction": 0.25, "int": 1.0, "half": 0.5}


@pytest.mark.parametrize("what", ERRORS + ["tensor"])
def test_a_value_that_is_not_a_reward_is_a_verifier_error(what: str) -> None:
    if what == "tensor":
        pytest.importorskip("torch")
    res = score_one(RewardItem("faults_return", what, "", {}))
    assert res.error and res.kind == "invalid" and res.reward == 0.0, res
    assert "verifier returned" in str(res.reason)


@pytest.mark.parametrize(("what", "reward"), sorted(REWARDS.items()))
def test_real_numbers_and_bools_are_rewards(what: str, reward: float) -> None:
    res = score_one(RewardItem("faults_return", what, "", {}))
    assert res == RewardResult(reward) and type(res.reward) is float


def test_a_verifier_reported_error_counts_as_reported() -> None:
    res = coerce_result(RewardResult(1.0, "sandbox unavailable", True))
    assert (res.reward, res.error, res.kind, res.reason) == (0.0, True, "reported", "sandbox unavailable")


# ----------------------------------------------------------------- in-process scoring
@pytest.mark.parametrize(
    ("response", "reason"),
    [("raise", "RuntimeError: verifier bug"), ("exit0", "SystemExit"), ("ctrl-c", "KeyboardInterrupt")],
)
def test_in_process_verifier_cannot_end_the_run(response: str, reason: str) -> None:
    with RewardScorer(workers=0, timeout=5) as s:
        res = s.score_batch([RewardItem("faults_misbehave", response, "", {}), RewardItem("faults_misbehave", "ok", "", {})])
    assert res[0].error and res[0].kind == "raised" and reason in str(res[0].reason)
    assert res[1] == RewardResult(1.0)
    assert s.error_counts == {"raised": 1}


def test_in_process_hang_costs_the_timeout() -> None:
    with RewardScorer(workers=0, timeout=0.3) as s:
        res = s.score_batch([RewardItem("faults_misbehave", "hang", "", {}), RewardItem("faults_misbehave", "ok", "", {})])
    assert res[0].kind == "timeout" and "timed out after 0.3s" in str(res[0].reason)
    assert res[1] == RewardResult(1.0)


# -------------------------------------------------------------------- worker scoring
def test_every_worker_fault_is_one_counted_verifier_error(caplog: pytest.LogCaptureFixture) -> None:
    kinds = {"raise": "raised", "exit0": "raised", "ctrl-c": "raised", "os-exit": "crashed", "hang": "timeout",
             "string": "invalid"}  # fmt: skip
    items = [RewardItem("faults_misbehave", r, "", {}) for r in kinds] + [RewardItem("faults_misbehave", "ok", "", {})]
    with caplog.at_level(logging.WARNING, logger="bots_rft.rewards"), RewardScorer(workers=2, timeout=1.0) as s:
        res = s.score_batch(items)
        assert [r.kind for r in res] == [*kinds.values(), None]
        assert res[-1] == RewardResult(1.0) and all(r.reward == 0.0 for r in res[:-1])
        assert "exit status 3" in str(res[3].reason) and "timed out after 1s" in str(res[4].reason)
        assert s.error_counts == {"raised": 3, "crashed": 1, "timeout": 1, "invalid": 1}
        # Logged once per kind, with the count and the verifier's name.
        lines = [r.getMessage() for r in caplog.records if r.name == "bots_rft.rewards"]
        assert len(lines) == 4
        assert any("(raised) on 3 of 7" in m and "test_faults:misbehaving" in m for m in lines)
        assert s.score_batch([RewardItem("faults_misbehave", "ok", "", {})]) == [RewardResult(1.0)]  # still serving


def test_a_verifier_that_always_hangs_costs_a_batch_fault_streak_timeouts() -> None:
    with RewardScorer(workers=1, timeout=0.3, fault_streak=2) as s:
        res = s.score_batch([RewardItem("faults_misbehave", "hang", "", {})] * 6 + [RewardItem("faults_return", "half", "", {})])
    assert all(r.kind == "timeout" for r in res[:6]) and res[6] == RewardResult(0.5)
    assert sum(str(r.reason).startswith("verifier timed out after") for r in res[:6]) == 2
    assert sum("not run: the verifier's last 2 calls" in str(r.reason) for r in res[:6]) == 4


def _main_verifier(data_source: str, response: str, ground_truth: Any, extra_info: Mapping[str, Any]) -> float:
    return 1.0


def test_a_verifier_the_workers_cannot_import_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A function of the running script (``__main__``) pickles by reference in the parent but
    cannot be found by the workers: refused up front, not a silent reward 0 per rollout."""
    fn = _main_verifier
    monkeypatch.setattr(fn, "__module__", "__main__")
    monkeypatch.setattr(sys.modules["__main__"], "_main_verifier", fn, raising=False)
    register_verifier("faults_main", fn)
    with RewardScorer(workers=1, timeout=5) as s:
        with pytest.raises(InvalidArgumentError, match=r"__main__.*move it into a module"):
            s.score_batch([RewardItem("faults_main", "", "", {})])
    with RewardScorer(workers=0) as s:  # in-process it is found
        assert s.score_batch([RewardItem("faults_main", "", "", {})]) == [RewardResult(1.0)]


def test_a_verifier_module_the_workers_lack_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    mod = types.ModuleType("faults_phantom_module")
    exec("def verify(d, r, g, e):\n    return 1.0\n", mod.__dict__)
    monkeypatch.setitem(sys.modules, "faults_phantom_module", mod)
    register_verifier("faults_phantom", mod.verify)
    with RewardScorer(workers=1, timeout=5) as s:
        with pytest.raises(InvalidArgumentError, match=r"cannot load faults_phantom_module:verify .*ModuleNotFoundError"):
            s.score_batch([RewardItem("faults_phantom", "", "", {})])


def test_worker_killed_mid_batch_is_replaced_and_leaves_no_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    pid_file = tmp_path / "hanging.pid"
    before = sorted(os.listdir(tmp))

    def kill_the_hanging_worker() -> None:
        for _ in range(600):
            if pid_file.exists() and pid_file.read_text():
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_the_hanging_worker)
    killer.start()
    with RewardScorer(workers=2, timeout=120) as s:
        items = [RewardItem("faults_misbehave", "hang-with-file", str(pid_file), {})]
        items += [RewardItem("faults_misbehave", "slow", "", {}) for _ in range(4)]
        res = s.score_batch(items)
        killer.join()
        assert res[0].kind == "crashed" and "killed by signal 9" in str(res[0].reason)
        assert res[1:] == [RewardResult(1.0)] * 4
        assert int(pid_file.read_text()) not in s.worker_pids and len(s.worker_pids) == 2
        # The killed worker's private temporary directory went with it.
        assert not any(p.name.startswith("answer-") for p in tmp.rglob("*"))
        assert s.score_batch([RewardItem("faults_misbehave", "ok", "", {})]) == [RewardResult(1.0)]
    assert sorted(os.listdir(tmp)) == before


def test_a_dead_scorers_worker_directories_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"bots-reward-{dead.pid}-abc" / "w-1"
    stale.mkdir(parents=True)
    (stale / "left-over").write_text("x")
    mine = tmp_path / f"bots-reward-{os.getpid()}-live"
    mine.mkdir()
    with RewardScorer(workers=1, timeout=5) as s:
        s.score_batch([RewardItem("faults_misbehave", "ok", "", {})])
    assert sorted(p.name for p in tmp_path.iterdir()) == [mine.name]
