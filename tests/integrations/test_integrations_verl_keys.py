"""verl: an error names the ``bots.*`` key the user typed (``bots.lam``, never ``lam``); the
``bots.*`` values are checked by the parameter catalogue (:meth:`Parameter.check`); a checkpoint
of a pool with the same task ids and other prompts is refused for that reason; the version check
says when a package under verl is outside the tested window; the BOTS trainers join verl's
registry when the entry point runs, not when the module is imported."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl.trainer.ppo.v1.replay_buffer", reason="verl 0.9 is not installed")

import pandas as pd  # noqa: E402

from bots_rft import BOTS, BotsError, Interpolation  # noqa: E402
from bots_rft.integrations import check as integrations_check  # noqa: E402
from bots_rft.integrations import verl as bv  # noqa: E402
from bots_rft.integrations.tasks import bind_pool, references_by_id  # noqa: E402
from test_integrations_verl_first_run import config  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
WEAK, STRONG = "qwen2.5_7b_pass_rate", "qwen3_30b_pass_rate"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("bots.lam=2", "bots.lam: must lie in [0, 1], got 2"),
        ("bots.rho=abc", "bots.rho: must be a real number, got 'abc'"),
        ("bots.target=-0.5", "bots.target: must lie in [0, 1], got -0.5"),
        ("bots.thompson=3", "bots.thompson: must be a bool, got 3"),
        ("bots.seed=-1", "bots.seed: must be an integer >= 0, got -1"),
        ("bots.momentum=3", "bots.momentum: must lie in [0, 1], got 3"),
        ("bots.min_gap=-1", "bots.min_gap: must lie in (0, 1), got -1"),
        ("bots.threads=-2", "bots.threads: "),
        ("bots.num_tasks=0", "bots.num_tasks: "),
        ("bots.success_threshold=nan", "bots.success_threshold: must be finite, got nan"),
        ("bots.checkpoint=/nowhere.bots", "bots.checkpoint: no checkpoint at '/nowhere.bots'"),
        (f"bots.weak_column=extra_info.index bots.strong_column={STRONG}", "bots.weak_column: "),
        (f"bots.weak_column={WEAK} bots.strong_column=data_source", "bots.strong_column: "),
        (f"bots.strong_column=null bots.weak_column={WEAK}", "bots.weak_column and bots.strong_column go together"),
    ],
)
def test_an_error_names_the_bots_key_typed(change: str, message: str) -> None:
    with pytest.raises(BotsError) as info:
        bv.preflight(config(*change.split()))
    assert str(info.value).startswith(message), str(info.value)


def test_the_bots_values_are_checked_by_the_catalogue(monkeypatch: pytest.MonkeyPatch) -> None:
    """One definition of each range: tightening a parameter's range in the catalogue tightens
    what verl accepts, and the default comes from it (no literal momentum of 0.9 here)."""
    import dataclasses

    from bots_rft.selector import parameters

    assert bv.BOTS_DEFAULTS["momentum"] is None and bv.BOTS_DEFAULTS["min_gap"] is None
    frame = bv._train_frame(config())
    sel = bv.build_sampler(config(), frame).selector
    assert sel.evidence.momentum == pytest.approx(parameters.MOMENTUM.default)  # type: ignore[union-attr]
    narrower = dataclasses.replace(parameters.LAM, high=0.05)
    monkeypatch.setitem(bv._PARAMETERS, "lam", narrower)
    with pytest.raises(BotsError, match=re.escape("bots.lam: must lie in [0, 0.05], got 0.1")):
        bv.build_sampler(config("bots.lam=0.1"), frame)


def _checkpoint_of(frame: pd.DataFrame, tmp_path: Path) -> str:
    weak, strong = references_by_id(frame, [WEAK, STRONG], task_id_column="extra_info.index")
    sel = BOTS(len(weak), n_rollouts=4, evidence=Interpolation(weak, strong))
    bind_pool(sel, list(frame["extra_info"].map(lambda e: e["index"])), "extra_info.index", frame)
    path = tmp_path / "other_prompts.bots"
    sel.save(path)
    return str(path)


def test_a_pool_with_the_same_ids_and_other_prompts_is_named_so(tmp_path: Path) -> None:
    from bots_rft import CheckpointError

    frame = bv._train_frame(config())
    other = frame.copy()
    other["prompt"] = [[{"role": "user", "content": f"another task {i}"}] for i in range(len(other))]
    # verl's resume (data.pt): the sampler's state knows its task ids, so the reason is exact.
    state = bv.build_sampler(config(), other).state_dict()
    with pytest.raises(CheckpointError) as info:
        bv.build_sampler(config(), frame).load_state_dict(state)
    text = str(info.value)
    assert "pool: the same task ids as the checkpoint's, with other prompts under them" in text, text
    assert not re.search(r"task ids [0-9a-f]{16} here", text), text
    moved = frame.copy()
    moved["extra_info"] = [{**e, "index": e["index"] + 1} for e in moved["extra_info"]]
    wide = config("bots.num_tasks=25")  # room for both sets of ids
    state = bv.build_sampler(wide, frame).state_dict()
    with pytest.raises(CheckpointError, match="pool: other task ids than the checkpoint's"):
        bv.build_sampler(wide, moved).load_state_dict(state)
    # bots.checkpoint (a BOTS.save file records one fingerprint of ids and prompts together): both
    # are named as possible, neither claimed.
    with pytest.raises(BotsError) as info:
        bv.preflight(config(f"bots.checkpoint={_checkpoint_of(other, tmp_path)}"))
    text = str(info.value)
    assert (
        "the training data (its prompts and task ids, extra_info.index or bots.task_id_column): its task ids, or the prompts under them, differ"
        in text
    ), text
    assert not re.search(r"task ids [0-9a-f]{16} here", text), text


def test_the_check_says_when_transformers_is_outside_the_tested_window(monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = next(a for a in integrations_check.ADAPTERS if a.name == "verl")
    ok, line = integrations_check.check(adapter)
    assert ok and "transformers" in line and "inside the tested window" in line, line
    real = integrations_check.installed_version

    def installed(name: str) -> str:
        return "5.24.0" if name == "transformers" else real(name)

    monkeypatch.setattr(integrations_check, "installed_version", installed)
    ok, line = integrations_check.check(adapter)
    assert ok and "transformers 5.24.0, OUTSIDE the tested window (5.25.0)" in line, line
    # The entry point's --check says it on its first line too (and a run, before it starts).
    monkeypatch.setattr(bv, "installed_version", installed)
    first = bv.preflight(config())[0]
    assert first.startswith("verl 0.9.1: inside") and first.endswith(
        "; transformers 5.24.0, OUTSIDE the tested window (5.25.0)"
    )


def test_importing_the_adapter_registers_nothing_and_main_registers(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY\n"
        "import bots_rft.integrations.verl as bv\n"
        "print(sorted(n for n in TRAINER_REGISTRY if n.startswith('bots_')))\n"
        "sys.argv = ['x', '--check', 'data.train_files=/nowhere.parquet']\n"
        "try:\n"
        "    bv.main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(n for n in TRAINER_REGISTRY if n.startswith('bots_')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("[")]
    assert lines == ["[]", str(sorted(bv.BOTS_MODES))], done.stdout[-2000:] + done.stderr[-2000:]
