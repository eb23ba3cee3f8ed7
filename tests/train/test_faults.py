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

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


# ----------------------------------------------------------------- verifiers (module level:
# the scorer's worker processes import them by name)
def returning(data_source: str, response: str, ground_truth: Any, extra_info: Mapping[str, Any]) -> Any:
    """Returns what ``response`` names (``extra_info`` can't carry non-JSON values)."""
    values: dict[str, Any] = {
        "str": "1.0",
        "none": None,
        "nan": math.nan,
        "inf": math.inf,
        "-inf": -math.inf,
        "1.5": 1.5,
        "-1": -1,
        "complex": complex(1, 0),
        "ndarray": np.array(1.0),
        "list": [1.0],
        "dict": {"reward": 1},
        "nan_result": RewardResult(math.nan),
        "true": True,
        "false": False,
        "f32": np.float32(0.5),
        "fraction": Fraction(1, 4),
        "int": 1,
        "half": 0.5,
    }
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
        res = s.score_batch(
            [RewardItem("faults_misbehave", response, "", {}), RewardItem("faults_misbehave", "ok", "", {})]
        )
    assert res[0].error and res[0].kind == "raised" and reason in str(res[0].reason)
    assert res[1] == RewardResult(1.0)
    assert s.error_counts == {"raised": 1}


def test_in_process_hang_costs_the_timeout() -> None:
    with RewardScorer(workers=0, timeout=0.3) as s:
        res = s.score_batch(
            [RewardItem("faults_misbehave", "hang", "", {}), RewardItem("faults_misbehave", "ok", "", {})]
        )
    assert res[0].kind == "timeout" and "timed out after 0.3s" in str(res[0].reason)
    assert res[1] == RewardResult(1.0)


# -------------------------------------------------------------------- worker scoring
def test_every_worker_fault_is_one_counted_verifier_error(caplog: pytest.LogCaptureFixture) -> None:
    kinds = {
        "raise": "raised",
        "exit0": "raised",
        "ctrl-c": "raised",
        "os-exit": "crashed",
        "hang": "timeout",
        "string": "invalid",
    }
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
        res = s.score_batch(
            [RewardItem("faults_misbehave", "hang", "", {})] * 6 + [RewardItem("faults_return", "half", "", {})]
        )
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
    with (
        RewardScorer(workers=1, timeout=5) as s,
        pytest.raises(InvalidArgumentError, match=r"__main__.*move it into a module"),
    ):
        s.score_batch([RewardItem("faults_main", "", "", {})])
    with RewardScorer(workers=0) as s:  # in-process it is found
        assert s.score_batch([RewardItem("faults_main", "", "", {})]) == [RewardResult(1.0)]


def test_a_verifier_module_the_workers_lack_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    mod = types.ModuleType("faults_phantom_module")
    exec("def verify(d, r, g, e):\n    return 1.0\n", mod.__dict__)
    monkeypatch.setitem(sys.modules, "faults_phantom_module", mod)
    register_verifier("faults_phantom", mod.verify)
    with (
        RewardScorer(workers=1, timeout=5) as s,
        pytest.raises(InvalidArgumentError, match=r"cannot load faults_phantom_module:verify .*ModuleNotFoundError"),
    ):
        s.score_batch([RewardItem("faults_phantom", "", "", {})])


def test_worker_killed_mid_batch_is_replaced_and_leaves_no_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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


# ============================================================================ training runs
def toy_or_hang(data_source: str, response: str, ground_truth: Any, extra_info: Mapping[str, Any]) -> float:
    """The toy reward, except that while the file ``$FAULTS_HANG_FILE`` exists it leaves a
    temporary file behind, says so (``<file>.hanging``) and hangs."""
    from bots_rft.train.toy import toy_reward

    hang = os.environ.get("FAULTS_HANG_FILE")
    if hang and Path(hang).exists():
        fd, _ = tempfile.mkstemp(prefix="answer-")
        os.close(fd)
        Path(hang + ".hanging").write_text(str(os.getpid()))
        time.sleep(float(os.environ.get("FAULTS_HANG_SECONDS", "600")))
    return toy_reward(data_source, response, ground_truth, extra_info)


def toy_or_raise(data_source: str, response: str, ground_truth: Any, extra_info: Mapping[str, Any]) -> float:
    """Raises on responses starting with an even code point, else the toy reward."""
    from bots_rft.train.toy import toy_reward

    if response and ord(response[0]) % 2 == 0:
        raise ValueError(f"cannot score {response[:1]!r}")
    return toy_reward(data_source, response, ground_truth, extra_info)


def always_raise(data_source: str, response: str, ground_truth: Any, extra_info: Mapping[str, Any]) -> float:
    raise RuntimeError("reward model offline")


# One config for every run whose selections are compared: same threads, so that runs in
# different processes compute bit-identical results.
RUN = dict(
    model="tiny",
    device="cpu",
    batch_size=4,
    rollouts=4,
    mini_batch_size=2,
    micro_batch_size=8,
    max_new_tokens=6,
    lr=1e-3,
    warmup_steps=2,
    weak_column="weak_pass_rate",
    strong_column="strong_pass_rate",
    progress=False,
    eval_every=0,
    tensorboard=False,
    threads=1,
    save_every=1,
    keep_checkpoints=10,
)


def run_cfg(pool: Path, out: Path, **kw: Any) -> Any:
    from bots_rft.train import load_config

    base: dict[str, Any] = dict(RUN, pool=str(pool), out_dir=str(out), verifiers={"toy": "test_faults:toy_or_hang"})
    base.update(kw)
    return load_config(None, base)


def write_config(path: Path, pool: Path, **kw: Any) -> Path:
    import yaml  # type: ignore[import-untyped]

    cfg = dict(RUN, pool=str(pool), verifiers={"toy": "test_faults:toy_or_hang"})
    cfg.update(kw)
    path.write_text(yaml.safe_dump(cfg))
    return path


def bots_train(config: Path, out: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``bots train`` in its own process, as a user runs it."""
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), *sys.path]), **(env or {}))
    return subprocess.Popen(
        [sys.executable, "-m", "bots_rft.cli", "train", "--config", str(config), "--out", str(out), *extra],
        env=full_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def train_records(out: Path) -> list[dict[str, Any]]:
    from bots_rft.train.logger import read_metrics

    path = out / "metrics.jsonl"
    return [r for r in read_metrics(path) if r["kind"] == "train"] if path.exists() else []


def wait_for(cond: Any, what: str, proc: subprocess.Popen[str] | None = None, limit: float = 180.0) -> None:
    """Hang guard only (no timing is asserted): fail instead of waiting forever."""
    deadline = time.monotonic() + limit
    while not cond():
        if proc is not None and proc.poll() is not None:
            pytest.fail(
                f"the run ended (status {proc.returncode}) before {what}: {proc.stderr.read() if proc.stderr else ''}"
            )
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.05)


def finish(proc: subprocess.Popen[str], limit: float = 180.0) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the run did not end: {err[-2000:]}")
    return proc.returncode, out, err


def selections(records: list[dict[str, Any]]) -> list[tuple[int, list[int], list[float]]]:
    return [(r["step"], r["task_ids"], r["successes"]) for r in records]


STEPS = 5


@pytest.fixture(autouse=True)
def _keep_torch_threads() -> Any:
    """Training runs here use threads=1 (bit-identical to the runs in other processes); give the
    rest of the test session its thread count back."""
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    yield
    if before is not None and torch is not None:
        torch.set_num_threads(before)


@pytest.fixture(scope="module")
def reference(toy_pool: Path, tmp_path_factory: pytest.TempPathFactory) -> list[tuple[int, list[int], list[float]]]:
    """The selections of an uninterrupted run (in this process, with the same threads)."""
    from bots_rft.cli import main as cli_main

    tmp = tmp_path_factory.mktemp("reference")
    torch = sys.modules["torch"]
    before = torch.get_num_threads()
    try:
        assert (
            cli_main(
                [
                    "train",
                    "--config",
                    str(write_config(tmp / "c.yaml", toy_pool, steps=STEPS)),
                    "--out",
                    str(tmp / "run"),
                ]
            )
            == 0
        )
    finally:
        torch.set_num_threads(before)
    return selections(train_records(tmp / "run"))


def resume_here(config: Path, out: Path) -> int:
    """``bots train --resume`` in this process."""
    from bots_rft.cli import main as cli_main

    return cli_main(["train", "--config", str(config), "--out", str(out), "--resume"])


def test_sigkill_mid_train_then_resume_selects_as_an_uninterrupted_run(
    toy_pool: Path, tmp_path: Path, reference: Any
) -> None:
    config = write_config(tmp_path / "c.yaml", toy_pool, steps=STEPS)
    out = tmp_path / "run"
    proc = bots_train(config, out)
    wait_for(lambda: len(train_records(out)) >= 2, "step 2", proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert resume_here(config, out) == 0
    assert selections(train_records(out)) == reference


def test_sigterm_while_a_verifier_hangs_checkpoints_exits_143_and_resumes_exactly(
    toy_pool: Path, tmp_path: Path, reference: Any
) -> None:
    """The hang is in a worker process, which also left a temporary file: SIGTERM abandons the
    step being scored, checkpoints the last finished one, names it, exits 143 and leaves none of
    the workers' files in the temporary directory."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    hang = tmp_path / "hang"
    config = write_config(tmp_path / "c.yaml", toy_pool, steps=STEPS, reward_timeout=600)
    out = tmp_path / "run"
    proc = bots_train(config, out, env={"FAULTS_HANG_FILE": str(hang), "TMPDIR": str(tmp)})
    wait_for(lambda: len(train_records(out)) >= 2, "step 2", proc)
    hang.write_text("")
    wait_for(lambda: Path(str(hang) + ".hanging").exists(), "the verifier to hang", proc)
    proc.send_signal(signal.SIGTERM)
    status, _, err = finish(proc, limit=60)
    done = train_records(out)[-1]["step"]
    assert status == 143, err
    assert f"stopped by SIGTERM; checkpoint of step {done} saved" in err
    assert (out / "checkpoints" / "latest").read_text().strip() == f"step_{done:06d}"
    # The hanging worker's directory and file went with it (torch keeps its own cache there).
    assert [p.name for p in tmp.rglob("*") if p.name.startswith(("bots-reward-", "answer-"))] == []
    hang.unlink()
    assert resume_here(config, out) == 0
    assert selections(train_records(out)) == reference


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_an_in_process_verifier_hangs(
    toy_pool: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signum: int
) -> None:
    """``reward_workers=0``: the signal reaches the verifier stuck in this very process."""
    from bots_rft.train.trainer import GRPOTrainer

    hang = tmp_path / "hang"
    monkeypatch.setenv("FAULTS_HANG_FILE", str(hang))
    monkeypatch.setenv("FAULTS_HANG_SECONDS", "30")
    trainer = GRPOTrainer(run_cfg(toy_pool, tmp_path / "run", steps=4, reward_workers=0, save_every=0))
    real_step = trainer.train_step

    def step_then_hang() -> dict[str, Any]:
        rec = real_step()
        if rec["step"] == 2:
            hang.write_text("")
        return rec

    def terminate_when_hanging() -> None:
        for _ in range(1200):
            if Path(str(hang) + ".hanging").exists():
                os.kill(os.getpid(), signum)
                return
            time.sleep(0.05)

    trainer.train_step = step_then_hang  # type: ignore[method-assign]
    killer = threading.Thread(target=terminate_when_hanging)
    killer.start()
    try:
        res = trainer.run()
    finally:
        killer.join()
        trainer.close()
    assert res.interrupted and res.signal == signum and res.steps_done == 2
    assert (tmp_path / "run" / "checkpoints" / "latest").read_text().strip() == "step_000002"
    assert [r["step"] for r in train_records(tmp_path / "run")] == [1, 2]


def test_verifier_errors_are_counted_per_step_and_in_the_summary(
    toy_pool: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bots_rft.cli import main as cli_main

    config = write_config(tmp_path / "c.yaml", toy_pool, steps=2, verifiers={"toy": "test_faults:toy_or_raise"})
    assert cli_main(["train", "--config", str(config), "--out", str(tmp_path / "run")]) == 0
    recs = train_records(tmp_path / "run")
    assert len(recs) == 2  # training went on
    total = sum(r["verifier_errors"] for r in recs)
    assert total > 0 and all(
        r["verifier_error_kinds"] == ({"raised": r["verifier_errors"]} if r["verifier_errors"] else {}) for r in recs
    )
    out = capsys.readouterr().out
    assert "done after step 2" in out and "verifier error(s) scored as failures (raised: " in out
    evals = [
        r
        for r in (json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines())
        if r["kind"] == "eval"
    ]
    summary = int(out.split("; ")[-1].split(" verifier error")[0])
    assert summary == total + sum(r["verifier_errors"] for r in evals)


def test_a_step_of_only_verifier_errors_stops_with_status_3(
    toy_pool: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bots_rft.cli import main as cli_main

    config = write_config(
        tmp_path / "c.yaml", toy_pool, steps=3, verifiers={"toy": "test_faults:always_raise"}, reward_workers=0
    )
    assert cli_main(["train", "--config", str(config), "--out", str(tmp_path / "run")]) == 3
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err  # one line, even where logging reaches stderr
    assert "step 1: 16 of 16 verifications were verifier errors" in err
    assert (
        "test_faults:always_raise for data_source 'toy/first_char': verifier raised RuntimeError: reward model offline"
        in err
    )
    assert "checkpoint of step 0 saved" in err
    assert train_records(tmp_path / "run") == []  # nothing was learnt from them
    # A lower threshold stops a run whose verifier fails on part of the rollouts.
    config = write_config(
        tmp_path / "d.yaml",
        toy_pool,
        steps=3,
        verifiers={"toy": "test_faults:toy_or_raise"},
        reward_workers=0,
        verifier_error_stop=0.05,
    )
    assert cli_main(["train", "--config", str(config), "--out", str(tmp_path / "run2")]) == 3
    assert "verifier_error_stop=0.05" in capsys.readouterr().err


def test_an_existing_run_is_not_clobbered(toy_pool: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bots_rft.cli import main as cli_main

    out = tmp_path / "run"
    config = write_config(tmp_path / "c.yaml", toy_pool, steps=1, reward_workers=0)
    assert cli_main(["train", "--config", str(config), "--out", str(out)]) == 0
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    capsys.readouterr()
    assert cli_main(["train", "--config", str(config), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "out_dir:" in err and "already holds a training run" in err
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before  # nothing written
    assert cli_main(["train", "--config", str(config), "--out", str(out), "--resume", "steps=2"]) == 0
    assert [r["step"] for r in train_records(out)] == [1, 2]
    assert cli_main(["train", "--config", str(config), "--out", str(out), "--overwrite"]) == 0
    assert [r["step"] for r in train_records(out)] == [1]
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["latest", "step_000001"]


# ------------------------------------------------------------------------ pool identity
def _pool_with(tmp: Path, rows: list[dict[str, Any]], name: str) -> Path:
    from bots_rft.data import TaskPool

    path = tmp / name
    TaskPool.from_records(rows).to_parquet(path)
    return path


def test_resume_refuses_a_changed_pool_and_extends_on_request(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from bots_rft import BOTS
    from bots_rft.errors import ConfigError
    from bots_rft.train.toy import toy_rows
    from bots_rft.train.trainer import GRPOTrainer, train

    rows = toy_rows(12)
    base = _pool_with(tmp_path, rows, "base.parquet")
    out = tmp_path / "run"
    train(run_cfg(base, out, steps=1, reward_workers=0))
    saved = BOTS.load(out / "checkpoints" / "step_000001" / "selector.bots")

    def resume(pool: Path, **kw: Any) -> Any:
        return GRPOTrainer(run_cfg(pool, out, steps=2, reward_workers=0, resume=True, **kw))

    moved = _pool_with(tmp_path, rows, "same-content-elsewhere.parquet")
    resume(moved).close()  # same tasks under another path: fine
    bigger = _pool_with(tmp_path, rows[:5] + toy_rows(2, start=500) + rows[5:], "bigger.parquet")
    with pytest.raises(
        ConfigError, match=r"not the pool the checkpoint .* \(12 -> 14 tasks: 2 task\(s\) added\); .*--extend-pool"
    ):
        resume(bigger)
    smaller = _pool_with(tmp_path, rows[:11], "smaller.parquet")
    with pytest.raises(ConfigError, match=r"12 -> 11 tasks: 1 task\(s\) removed \(ids \[11\]\)"):
        resume(smaller)
    with pytest.raises(ConfigError, match=r"1 task\(s\) of the checkpoint's pool are missing \(ids \[11\]\)"):
        resume(smaller, extend_pool=True)
    edited = [dict(r) for r in rows]
    edited[3] = dict(edited[3], reward_model={"ground_truth": "0/1", "style": "rule"})
    with pytest.raises(ConfigError, match=r"same 12 task ids, different content"):
        resume(_pool_with(tmp_path, edited, "edited.parquet"))

    grown = resume(bigger, extend_pool=True)
    sel = grown.selector
    assert isinstance(sel, BOTS) and sel.num_tasks == 14
    old_rows = [0, 1, 2, 3, 4] + list(range(7, 14))
    assert np.array_equal(sel.alpha[old_rows], saved.alpha) and np.array_equal(sel.beta[old_rows], saved.beta)
    assert np.array_equal(sel.alpha[[5, 6]], [1.0, 1.0]) and np.array_equal(sel.beta[[5, 6]], [1.0, 1.0])
    res = grown.run()
    grown.close()
    assert res.steps_done == 2


# ------------------------------------------------------------------ checkpoint contents
def test_checkpoints_hold_no_pickles_and_pickles_are_never_loaded(toy_pool: Path, tmp_path: Path) -> None:
    import pickle

    from bots_rft.errors import CheckpointError
    from bots_rft.train.trainer import GRPOTrainer, train

    out = tmp_path / "run"
    train(run_cfg(toy_pool, out, steps=1, reward_workers=0, method="random"))
    ckpt = out / "checkpoints" / "step_000001"
    assert sorted(p.suffix for p in ckpt.iterdir()) and not [
        p for p in ckpt.iterdir() if p.suffix in (".pt", ".pkl", ".bin")
    ]
    # A checkpoint in the old (pickle) layout, whose unpickling would run code, is refused unread.
    marker = tmp_path / "pwned"

    class Payload:
        def __reduce__(self) -> Any:
            return (Path.write_text, (marker, "code ran"))

    old = out / "checkpoints" / "step_000002"
    old.mkdir()
    for name in ("trainer.pt", "model.pt", "optimizer.pt", "scheduler.pt", "rng_rank0.pt", "selector.pt"):
        (old / name).write_bytes(pickle.dumps(Payload()))
    (out / "checkpoints" / "latest").write_text("step_000002\n")
    with pytest.raises(CheckpointError, match="pickles, which this version does not load"):
        GRPOTrainer(run_cfg(toy_pool, out, steps=3, reward_workers=0, method="random", resume=True))
    assert not marker.exists()


def _rewrite(data: bytes, edit: Any) -> bytes:
    """A legacy-format (BOTSRFT) selector file with its JSON header edited and its checksum
    recomputed."""
    import hashlib
    import struct

    prefix = struct.Struct("<8sIQ")
    magic, version, hlen = prefix.unpack_from(data)
    header = json.loads(data[prefix.size : prefix.size + hlen])
    payload = data[prefix.size + hlen : -32]
    edit(header)
    new_header = json.dumps(header).encode()
    body = prefix.pack(magic, version, len(new_header)) + new_header + payload
    return body + hashlib.sha256(body).digest()


LEGACY_SELECTOR = Path(__file__).parents[1] / "data" / "legacy_selector.bots"


@pytest.mark.parametrize(
    ("what", "edit", "match"),
    [
        ("alpha reads beta's bytes", lambda h: h["arrays"][0].update(offset=h["arrays"][1]["offset"]), "overlap"),
        (
            "alpha reads the checksum",
            lambda h: h["arrays"][-1].update(offset=h["arrays"][-1]["offset"] + 64),
            "outside",
        ),
        ("size does not fit the shape", lambda h: h["arrays"][0].update(nbytes=8), "do not hold shape"),
        ("negative offset", lambda h: h["arrays"][0].update(offset=-64), "invalid offset"),
        ("object dtype", lambda h: h["arrays"][0].update(dtype="|O"), "not allowed"),
        ("dangling reference", lambda h: h["state"].update(alpha={"__array__": 99}), "reference to array 99"),
    ],
)
def test_legacy_selector_file_offsets_are_checked_against_the_file(
    tmp_path: Path, what: str, edit: Any, match: str
) -> None:
    """Files of the legacy format are still read, with the same checks of their header."""
    from bots_rft import BOTS
    from bots_rft.errors import CheckpointError

    path = tmp_path / "selector.bots"
    path.write_bytes(_rewrite(LEGACY_SELECTOR.read_bytes(), edit))
    with pytest.raises(CheckpointError, match=match):
        BOTS.load(path)


def _entry(name: str, **change: Any) -> Any:
    return lambda h: h[name].update(change)


@pytest.mark.parametrize(
    ("what", "edit", "match"),
    [
        ("alpha reads beta's bytes", lambda h: h["alpha"].update(data_offsets=h["beta"]["data_offsets"]), "corrupt"),
        ("alpha reads past the end", lambda h: h["alpha"].update(data_offsets=[0, 10**6]), "do not end where the file"),
        ("shape does not fit the size", _entry("alpha", shape=[3]), "corrupt"),
        ("negative offset", _entry("alpha", data_offsets=[-8, 0]), "no valid byte range"),
        ("object dtype", _entry("alpha", dtype="O"), "corrupt"),
        ("unknown version", lambda h: h["__metadata__"]["bots-rft"].update(version="two"), "format version"),
        ("no tree", lambda h: h["__metadata__"]["bots-rft"].pop("tree"), "corrupt header"),
        ("another format", lambda h: h["__metadata__"]["bots-rft"].update(format="other"), "not a bots-rft checkpoint"),
        ("no metadata", lambda h: h.pop("__metadata__"), "not a bots-rft checkpoint"),
    ],
)
def test_selector_file_header_is_checked_against_the_file(tmp_path: Path, what: str, edit: Any, match: str) -> None:
    """A header edited to point elsewhere is refused even when the checksum was recomputed."""
    from bots_rft import BOTS
    from bots_rft.errors import CheckpointError
    from checkpoint_files import rewrite_header

    sel = BOTS(40, seed=1)
    sel.update([0, 1], [1.0, 2.0], 4.0)
    path = tmp_path / "selector.bots"
    sel.save(path)
    path.write_bytes(rewrite_header(path.read_bytes(), edit))
    with pytest.raises(CheckpointError, match=rf"^{path}: .*{match}"):
        BOTS.load(path)


@pytest.mark.parametrize(
    ("what", "edit", "match"),
    [
        ("dangling reference", lambda t: t.update(alpha={"__array__": "nope"}), "reference to array 'nope'"),
        ("unknown marker", lambda t: t.update(alpha={"__pickle__": "x"}), "unknown entry"),
        (
            "raw bytes as objects",
            lambda t: t.update(alpha={"__array__": "alpha", "dtype": "|O", "shape": [40]}),
            "not allowed",
        ),
        (
            "raw bytes, wrong shape",
            lambda t: t.update(alpha={"__array__": "alpha", "dtype": "<f8", "shape": [41]}),
            "do not hold",
        ),
    ],
)
def test_selector_file_tree_is_checked(tmp_path: Path, what: str, edit: Any, match: str) -> None:
    from bots_rft import BOTS
    from bots_rft.errors import CheckpointError
    from checkpoint_files import edit_tree

    sel = BOTS(40, seed=1)
    path = tmp_path / "selector.bots"
    sel.save(path)
    path.write_bytes(edit_tree(path.read_bytes(), edit))
    with pytest.raises(CheckpointError, match=match):
        BOTS.load(path)
