"""verl: what the command says is what the run does (issue 45). ``bots.checkpoint`` never replaces
a key the command sets (a differing one is refused naming it, unless ``bots.checkpoint_params``
says which wins), ``rollout.n`` and ``bots.n_rollouts`` agree, verl <= 0.7's ``data.sampler`` and
a worker count BOTS would override are refused, and ``--check`` describes the selector it built."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl.trainer.ppo.v1.replay_buffer", reason="verl 0.9 is not installed")

from bots_rft import BOTS, ConfigError, Interpolation  # noqa: E402
from bots_rft.integrations import verl as bv  # noqa: E402
from bots_rft.integrations.tasks import bind_pool, references_by_id  # noqa: E402
from test_integrations_verl_first_run import config  # noqa: E402

pytestmark = pytest.mark.slow

WEAK, STRONG = "qwen2.5_7b_pass_rate", "qwen3_30b_pass_rate"
COLUMNS = (f"bots.weak_column={WEAK}", f"bots.strong_column={STRONG}")


def _saved(tmp_path: Path, *, evidence: bool = True, pool: Any = None, **params: Any) -> str:
    """A checkpoint of the toy pool's selector (its references by id, 4 rollouts, bound to the
    toy pool unless ``pool`` names other task ids), after one update."""
    frame = bv._train_frame(config())
    weak, strong = references_by_id(frame, [WEAK, STRONG], task_id_column="extra_info.index")
    sel = BOTS(
        len(weak),
        n_rollouts=params.pop("n_rollouts", 4),
        evidence=Interpolation(weak, strong) if evidence else None,
        **params,
    )
    if pool is None:  # the toy pool, as an adapter binds it (task ids and prompts)
        bind_pool(sel, list(frame["extra_info"].map(lambda e: e["index"])), "extra_info.index", frame)
    else:
        sel.set_pool(pool)
    sel.update(sel.select(4), [1, 2, 3, 4], 4)
    path = tmp_path / "start.bots"
    sel.save(path)
    return str(path)


def test_a_checkpoint_fills_unset_keys_and_check_describes_the_selector_built(tmp_path: Path) -> None:
    path = _saved(tmp_path, lam=0.2, seed=7)
    lines = bv.preflight(config(f"bots.checkpoint={path}"))
    assert lines[4].startswith("selector: BOTS(lam=0.2, rho=0.1, target=0.5, n_rollouts=4, thompson=True, seed=7")
    assert f"resumed from {path} (1 update, 1 selection)" in lines[4]
    assert f"interpolation evidence from {WEAK} / {STRONG} (references " in lines[4]
    assert "pool fingerprint " in lines[3]
    # The fingerprint printed is the selector's own.
    sel = bv.build_sampler(config(f"bots.checkpoint={path}"), bv._train_frame(config())).selector
    assert sel.identity["evidence"]["sha256"] in lines[4] and sel.pool in lines[3]
    assert sel.num_updates == 1 and sel.lam == 0.2


@pytest.mark.parametrize(
    ("saved", "change", "drop", "named"),
    [
        ({"lam": 0.2}, ("bots.lam=0.3",), (), "bots.lam: 0.3 here, 0.2 in the state"),
        (
            {"n_rollouts": 8},
            (),
            (),
            "bots.n_rollouts (default: actor_rollout_ref.rollout.n): 4.0 here, 8.0 in the state",
        ),
        ({"evidence": False}, (), (), "bots.weak_column / bots.strong_column: interpolation (references"),
        ({}, (), COLUMNS, "bots.weak_column / bots.strong_column: none here, interpolation"),
        ({"pool": range(100, 124)}, (), (), "the training data (its prompts and task ids"),
    ],
)
def test_a_checkpoint_never_overrides_what_the_command_sets(
    tmp_path: Path, saved: dict[str, Any], change: tuple[str, ...], drop: tuple[str, ...], named: str
) -> None:
    path = _saved(tmp_path, **saved)
    with pytest.raises(ConfigError, match=r"^bots.checkpoint: .* other settings than this run's") as info:
        bv.preflight(config(f"bots.checkpoint={path}", *change, drop=drop))
    assert named in str(info.value) and "bots.checkpoint_params=checkpoint" in str(info.value)


def test_checkpoint_params_says_which_wins(tmp_path: Path) -> None:
    path = _saved(tmp_path, evidence=False, lam=0.2)
    theirs = bv.preflight(config(f"bots.checkpoint={path}", "bots.lam=0.3", "bots.checkpoint_params=checkpoint"))
    assert "lam=0.2" in theirs[4] and "no implicit evidence" in theirs[4]
    ours = bv.preflight(config(f"bots.checkpoint={path}", "bots.lam=0.3", "bots.checkpoint_params=current"))
    assert "lam=0.3" in ours[4] and "interpolation evidence from" in ours[4]
    with pytest.raises(ConfigError, match="^bots.checkpoint_params: must be error, checkpoint or current"):
        bv.preflight(config(f"bots.checkpoint={path}", "bots.checkpoint_params=mine"))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("bots.n_rollouts=8", "bots.n_rollouts: 8 rollouts per task, but actor_rollout_ref.rollout.n is 4"),
        ("+data.sampler.class_path=my_curriculum.py", "data.sampler: verl 0.9's V1 trainer never reads it"),
        ("data.dataloader_num_workers=4", "data.dataloader_num_workers: 4, but BOTS's training loader runs with 0"),
    ],
)
def test_settings_verl_would_ignore_or_contradict_are_refused(change: str, message: str) -> None:
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        bv.preflight(config(change))


def test_a_data_pt_written_with_other_references_is_refused_on_resume() -> None:
    from bots_rft import CheckpointError

    frame = bv._train_frame(config())
    saved = bv.build_sampler(config(), frame)  # the documented command: interpolation evidence
    state = saved.state_dict()
    other = bv.build_sampler(config(drop=COLUMNS), frame)
    with pytest.raises(
        CheckpointError, match=r"^data\.pt .*evidence: none here.*set bots\.checkpoint_params='checkpoint'"
    ):
        other.load_state_dict(state)
    took = bv.build_sampler(config("bots.checkpoint_params=checkpoint", drop=COLUMNS), frame)
    took.load_state_dict(state)
    assert took.selector.identity == saved.selector.identity


def test_a_run_keeps_hydras_files_with_its_checkpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """hydra's default outputs/<date>/<time>/ landed in the working directory (the repository);
    a run without --check puts them under trainer.default_local_dir unless hydra.run.dir is set."""
    import logging
    import sys

    ran: list[Any] = []
    monkeypatch.setattr(bv, "_run", lambda config: ran.append(config))
    # hydra.main configures logging (dictConfig disables existing loggers): put it back afterwards.
    loggers = [lg for lg in logging.Logger.manager.loggerDict.values() if isinstance(lg, logging.Logger)]
    for lg in [*loggers, logging.getLogger()]:
        monkeypatch.setattr(lg, "disabled", lg.disabled)
        monkeypatch.setattr(lg, "level", lg.level)
        monkeypatch.setattr(lg, "handlers", list(lg.handlers))
        monkeypatch.setattr(lg, "propagate", lg.propagate)
    monkeypatch.chdir(tmp_path)
    quiet = ["hydra/job_logging=disabled", "hydra/hydra_logging=disabled"]  # leave this session's logging alone
    monkeypatch.setattr(sys, "argv", ["verl", "trainer.default_local_dir=ckpt", *quiet])
    bv.main()
    assert len(ran) == 1 and not (tmp_path / "outputs").exists()
    assert [p.name for p in (tmp_path / "ckpt" / "hydra").iterdir()]  # hydra's run folder
    monkeypatch.setattr(sys, "argv", ["verl", f"hydra.run.dir={tmp_path / 'mine'}", *quiet])
    bv.main()
    assert (tmp_path / "mine").is_dir() and len(ran) == 2
