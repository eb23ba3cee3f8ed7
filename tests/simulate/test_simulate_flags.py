"""``bots simulate``'s flags come from :class:`~bots_rft.simulate.SimConfig`'s fields and their
docs: every flag builds the config it names, a run's command names what it set, and a field added
to the config gets a flag of its own without a line of the parser changing."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from bots_rft.cli import build_parser
from bots_rft.cli import main as cli_main
from bots_rft.commands.simulate import build_config, command_line
from bots_rft.simulate import LearnerConfig, SimConfig

FULL = [
    *("--tasks", "500", "--steps", "7", "--batch", "12", "--rollouts", "4", "--seeds", "2", "--first-seed", "5"),
    *("--methods", "random,bots,dapo", "--lam", "0.3", "--rho", "0.2", "--rho-sweep", "0,0.5", "--lam-sweep", "none"),
    *("--no-sampling-ablation", "--target", "0.4", "--tau", "0.05", "--adaptive-rho", "--adaptive-lam"),
    *("--tau-sweep", "0,0.1", "--target-sweep", "0.3", "--adaptive-ablation", "--lag", "2", "--lag-discount", "0.8"),
    *("--lag-discount-sweep", "1,0.5", "--dapo-oversample", "2", "--groups", "3", "--eval-tasks", "50"),
    *("--learner", "weak_level=0.5", "--param", "momentum=0.5", "--threads", "0"),
]

OPTIONS = {
    *("--tasks", "--steps", "--batch", "--rollouts", "--seeds", "--first-seed", "--methods", "--lam", "--rho"),
    *("--rho-sweep", "--lam-sweep", "--sampling-ablation", "--no-sampling-ablation", "--target", "--tau"),
    *("--adaptive-rho", "--no-adaptive-rho", "--adaptive-lam", "--no-adaptive-lam", "--tau-sweep", "--target-sweep"),
    *("--adaptive-ablation", "--no-adaptive-ablation", "--lag", "--lag-discount", "--lag-discount-sweep"),
    *("--dapo-oversample", "--min-gap", "--groups", "--eval-tasks", "--learner", "--param", "--threads", "--out"),
    *("--overwrite", "--no-plots", "--no-progress", "--scenario", "--pool-weights", "--checks", "--help", "-h"),
}


def _simulate_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["simulate"]


def _options() -> set[str]:
    return {name for action in _simulate_parser()._actions for name in action.option_strings}


def test_every_flag_builds_the_config_and_command_it_always_built() -> None:
    args = build_parser().parse_args(["simulate"])
    assert build_config(args) == SimConfig(methods=("random", "offline", "mopps", "dots", "bots", "dynamic"))
    assert command_line(args) == (
        "bots simulate --tasks 54400 --steps 100 --batch 256 --rollouts 16 --seeds 3 --first-seed 0 "
        "--methods random,offline,mopps,dots,bots,dynamic --lam 0.1 --rho 0.1 --rho-sweep 0,0.05,0.1,0.2,0.5,1 "
        "--lam-sweep 0,0.05,0.1,0.2,0.5,1 --sampling-ablation --dapo-oversample 3 --groups 8 --eval-tasks 4096"
    )
    args = build_parser().parse_args(["simulate", *FULL])
    assert build_config(args) == SimConfig(
        learner=LearnerConfig(num_tasks=500, num_groups=3, eval_tasks=50, n_rollouts=4, weak_level=0.5),
        steps=7,
        batch_size=12,
        seeds=(5, 6),
        methods=("random", "bots", "dynamic"),
        lam=0.3,
        rho=0.2,
        rho_sweep=(0.0, 0.5),
        lam_sweep=(),
        sampling_ablation=False,
        dapo_oversample=2.0,
        threads=None,
        target=0.4,
        tau=0.05,
        adaptive_rho=True,
        adaptive_lam=True,
        tau_sweep=(0.0, 0.1),
        target_sweep=(0.3,),
        adaptive_ablation=True,
        lag=2,
        lag_discount=0.8,
        lag_discount_sweep=(1.0, 0.5),
        method_params=(("momentum", 0.5),),
    )
    assert command_line(args) == (
        "bots simulate --tasks 500 --steps 7 --batch 12 --rollouts 4 --seeds 2 --first-seed 5 "
        "--methods random,bots,dynamic --lam 0.3 --rho 0.2 --rho-sweep 0,0.5 --lam-sweep none --no-sampling-ablation "
        "--dapo-oversample 2 --groups 3 --eval-tasks 50 --target 0.4 --tau 0.05 --adaptive-rho --adaptive-lam "
        "--tau-sweep 0,0.1 --target-sweep 0.3 --adaptive-ablation --lag 2 --lag-discount 0.8 "
        "--lag-discount-sweep 1,0.5 --learner weak_level=0.5 --param momentum=0.5"
    )


def test_the_flags_are_those_of_before_and_one_for_the_information_setting() -> None:
    assert _options() == OPTIONS | {"--information"}


def test_the_information_setting_has_a_flag() -> None:
    """SimConfig.information (who reads the reference pass rates) is set from the command line
    like every other field, and refused outside its choices."""
    args = build_parser().parse_args(["simulate", "--information", "shared"])
    assert build_config(args).information == "shared"
    assert "--information shared" in command_line(args)
    assert build_config(build_parser().parse_args(["simulate"])).information == "paper"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["simulate", "--information", "everything"])


def test_a_run_command_names_the_interpolation_gap_it_was_given() -> None:
    """The command a run records reproduces it: a --min-gap other than the default is named."""
    args = build_parser().parse_args(["simulate", "--min-gap", "0.1"])
    assert build_config(args).min_gap == 0.1
    assert command_line(args).endswith(" --min-gap 0.1")


def test_a_new_config_field_gets_a_flag_without_editing_the_parser(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from bots_rft.parameters import TARGET
    from bots_rft.simulate import experiment
    from bots_rft.simulate.fields import documented

    wider = dataclasses.make_dataclass(
        "SimConfig",
        [
            ("warmup_steps", int, documented("steps of Random selection before every method starts", 0, minimum=0)),
            ("warmup_target", float, documented("p* of the warm-up", param=TARGET)),
            ("warmup_ablation", bool, documented("also a table with and without the warm-up", False)),
            ("warmup_sweep", tuple[float, ...], documented("also a table of these warm-up targets", (), param=TARGET)),
        ],
        bases=(SimConfig,),
        frozen=True,
    )
    monkeypatch.setattr(experiment, "SimConfig", wider)
    argv = ["simulate", "--warmup-steps", "3", "--warmup-target", "0.25", "--warmup-ablation"]
    args = build_parser().parse_args([*argv, "--warmup-sweep", "0.2,0.4"])
    config = build_config(args)
    assert isinstance(config, wider)
    assert (config.warmup_steps, config.warmup_target, config.warmup_ablation) == (3, 0.25, True)
    assert config.warmup_sweep == (0.2, 0.4)
    assert command_line(args).endswith(
        " --warmup-steps 3 --warmup-target 0.25 --warmup-ablation --warmup-sweep 0.2,0.4"
    )
    defaults = build_config(build_parser().parse_args(["simulate"]))
    assert (defaults.warmup_steps, defaults.warmup_target, defaults.warmup_sweep) == (0, TARGET.default, ())
    assert not defaults.warmup_ablation
    assert cli_main(["simulate", "--warmup-steps", "-1"]) == 2
    assert "argument --warmup-steps: must be >= 0, got -1" in capsys.readouterr().err
    assert cli_main(["simulate", "--warmup-target", "2"]) == 2
    assert "argument --warmup-target: must lie in [0, 1], got 2" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["simulate", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "--warmup-steps WARMUP_STEPS steps of Random selection before every method starts (default 0)" in shown
    assert "--warmup-ablation, --no-warmup-ablation also a table with and without the warm-up (default off)" in shown


def test_a_config_field_without_a_doc_has_no_flag_to_show_and_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from bots_rft.simulate import experiment

    wider = dataclasses.make_dataclass(
        "SimConfig", [("warmup_steps", int, dataclasses.field(default=0))], bases=(SimConfig,), frozen=True
    )
    monkeypatch.setattr(experiment, "SimConfig", wider)
    with pytest.raises(TypeError, match="warmup_steps"):
        build_parser()
