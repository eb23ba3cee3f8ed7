"""``bots simulate``: BOTS against the paper's baselines on a fast simulated learner.

Runs every method (and, by default, the paper's ρ and λ sweeps and the posterior-sampling
ablation) on a simulated RFT learner over several seeds, then writes under the run directory:
summary.md (the paper's TTB/BSF/ETR tables, the methods table with 95% intervals over seeds per
training step and per rollout spent, implicit-evidence quality), tables.csv, headline_seeds.csv,
curves.csv (every step of every run), heatmap_*.csv, evidence.csv, results.json, and PNG plots
(curves with 95% intervals, Random vs BOTS heatmaps, evidence quality). Every method is charged
every rollout it generates (screening, filtered groups, refills, per-task budgets).

See docs/what-bots-does.md for the simulator's model and the default run's results.
"""

from __future__ import annotations

import argparse
import shlex
import time
from pathlib import Path
from typing import Any

from ..selector.parameters import LAG_DISCOUNT, LAM, MIN_GAP, OVERSAMPLE, RHO, TARGET, TAU, Parameter
from ..selector.registry import METHODS
from ._args import check_output_dir, integer, parameter, real

# The simulator's table order (bots_rft.simulate.experiment.TABLE_ORDER; not imported, so that
# `bots --help` does not load the simulator).
DEFAULT_METHODS = "random,offline,mopps,dots,bots,dynamic"
DEFAULT_SWEEP = "0,0.05,0.1,0.2,0.5,1"
# The other names the method table accepts ("'dapo' is dynamic"), for --methods' help.
_ALIASES = "".join(f"{alias!r} is {m.name}; " for m in METHODS.values() for alias in m.aliases)


def _floats(text: str) -> tuple[float, ...]:
    """Sweep values: comma-separated numbers in [0, 1], or 'none'."""
    if text.strip().lower() in ("", "none", "off"):
        return ()
    unit = real(0.0, 1.0)
    try:
        return tuple(unit(v) for v in text.split(","))
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers in [0, 1] or 'none' ({exc})") from None


def _values(param: Parameter) -> Any:
    """A parser of comma-separated values of ``param`` (each checked by the method table), or 'none'."""
    one = parameter(param)

    def parse(text: str) -> tuple[float, ...]:
        if text.strip().lower() in ("", "none", "off"):
            return ()
        return tuple(one(v.strip()) for v in text.split(","))

    return parse


def _names(text: str) -> tuple[str, ...]:
    """Method names (or aliases) of the method table, as their canonical names."""
    from ..selector.registry import method, method_names

    names = tuple(v.strip().lower() for v in text.split(",") if v.strip())
    unknown = [n for n in names if n not in method_names(aliases=True)]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown method(s) {unknown or text!r}; known: {', '.join(METHODS)}")
    return tuple(method(n).name for n in names)


def _weights(text: str) -> tuple[float, ...]:
    """Three comma-separated weights >= 0, not all 0."""
    nonneg = real(0.0, float("inf"))
    values = tuple(nonneg(v) for v in text.split(","))
    if len(values) != 3 or sum(values) <= 0:
        raise argparse.ArgumentTypeError(f"expected three weights >= 0 (easy,medium,hard), not all 0, got {text!r}")
    return values


def _override(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "simulate",
        help="reproduce the paper's comparisons on a simulated learner (tables, plots, CSV)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--tasks", type=integer(1), default=54_400, help="pool size (default 54,400 = GURU-Math)")
    p.add_argument("--steps", type=integer(1), default=100, help="training steps (default 100)")
    p.add_argument("--batch", type=integer(1), default=256, help="tasks per step, at most --tasks (default 256)")
    # With one rollout no task is ever effective (0 < successes < 1) and GRPO has no signal.
    p.add_argument("--rollouts", type=integer(2), default=16, help="rollouts per task, >= 2 (default 16)")
    p.add_argument("--seeds", type=integer(1), default=3, help="number of seeds, 0..N-1 (default 3)")
    p.add_argument("--first-seed", type=integer(0), default=0, help="first seed (default 0)")
    p.add_argument(
        "--methods",
        type=_names,
        default=tuple(DEFAULT_METHODS.split(",")),
        help=f"comma-separated, from {', '.join(METHODS)} ({_ALIASES}default {DEFAULT_METHODS}); "
        "the peers from the literature (dps, greso, speed, adarft, knapsack, reinforce-ada) are "
        "described in docs/peers.md",
    )
    p.add_argument(
        "--lam",
        type=parameter(LAM),
        default=LAM.default,
        help=f"λ of bots and its variants (default {LAM.default:g}; MoPPS and DOTS fix theirs)",
    )
    p.add_argument(
        "--rho",
        type=parameter(RHO),
        default=RHO.default,
        help=f"ρ of bots and its variants (default {RHO.default:g}; MoPPS and DOTS fix theirs)",
    )
    p.add_argument(
        "--rho-sweep",
        type=_floats,
        default=_floats(DEFAULT_SWEEP),
        help=f"ρ values at λ=--lam, or 'none' (default {DEFAULT_SWEEP})",
    )
    p.add_argument(
        "--lam-sweep",
        type=_floats,
        default=_floats(DEFAULT_SWEEP),
        help=f"λ values at ρ=--rho, or 'none' (default {DEFAULT_SWEEP})",
    )
    p.add_argument(
        "--sampling-ablation",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run BOTS with the posterior mean instead of Thompson sampling",
    )
    p.add_argument(
        "--target",
        type=parameter(TARGET),
        default=TARGET.default,
        help=f"p*, the target success rate of every method that has one (default {TARGET.default:g})",
    )
    p.add_argument(
        "--tau",
        type=parameter(TAU),
        default=TAU.default,
        help="BOTS τ: 0 takes the tasks nearest p* (default); > 0 samples from softmax(−|θ − p*| / τ)",
    )
    p.add_argument(
        "--adaptive-rho",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="BOTS: halve ρ when the estimator's predictions miss by >= 0.25 (default off)",
    )
    p.add_argument(
        "--adaptive-lam",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="BOTS: scale λ by the learner's observed drift, within a factor 4 (default off)",
    )
    p.add_argument(
        "--tau-sweep",
        type=_values(TAU),
        default=(),
        help="also a table of BOTS with these τ values, e.g. 0,0.02,0.1 (default none)",
    )
    p.add_argument(
        "--target-sweep",
        type=_values(TARGET),
        default=(),
        help="also a table of BOTS with these targets p*, e.g. 0.3,0.5,0.7 (default none)",
    )
    p.add_argument(
        "--adaptive-ablation",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="also a table of BOTS with adaptive ρ and/or λ on and off (default off)",
    )
    p.add_argument(
        "--lag",
        type=integer(0),
        default=0,
        help="late evidence: the BOTS methods get each step's rollouts this many steps later, as evidence "
        "that many policy versions old (docs/planning.md; default 0)",
    )
    p.add_argument(
        "--lag-discount",
        type=parameter(LAG_DISCOUNT),
        default=LAG_DISCOUNT.default,
        help="δ: late evidence counts δ ** lag (default 1: no discount)",
    )
    p.add_argument(
        "--lag-discount-sweep",
        type=_values(LAG_DISCOUNT),
        default=(),
        help="also a table of BOTS under --lag with these δ values, e.g. 1,0.8,0.5 (default none)",
    )
    p.add_argument(
        "--dapo-oversample",
        type=parameter(OVERSAMPLE),
        default=OVERSAMPLE.default,
        help=f"DAPO generation batch as a multiple of the batch (default {OVERSAMPLE.default:g})",
    )
    p.add_argument(
        "--min-gap",
        type=parameter(MIN_GAP),
        default=MIN_GAP.default,
        help=f"interpolation estimator: skip batches whose mean references differ by less (default: {MIN_GAP.default:g})",
    )
    p.add_argument("--groups", type=integer(1), default=8, help="skill groups of the simulated pool")
    p.add_argument("--eval-tasks", type=integer(1), default=4096, help="held-out tasks (default 4096)")
    p.add_argument(
        "--learner",
        type=_override,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a simulator setting (see docs/what-bots-does.md), repeatable",
    )
    p.add_argument(
        "--param",
        type=_override,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a method parameter (e.g. momentum, step_size, gen_ratio) for every compared method that takes it, "
        "repeatable",
    )
    p.add_argument(
        "--threads", type=integer(0, 1024), default=1, help="threads of the BOTS core, 0 = every core (default 1)"
    )
    p.add_argument(
        "--out", type=Path, default=None, help="run directory, new or empty (default runs/simulate-YYYYmmdd-HHMMSS)"
    )
    p.add_argument("--overwrite", action="store_true", help="write into a --out directory that holds files")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--scenario",
        choices=("multipool", "graded"),
        default=None,
        help="instead of the paper's comparison: 'multipool' (three task sets by difficulty mixed "
        "by --pool-weights: Random, a fixed mix, one BOTS over all, MultiPool) or 'graded' "
        "(rewards = share of --checks sub-checks passed: BOTS on fractional evidence vs "
        "thresholded at 1 and 0.5); see docs/pools.md and docs/graded-rewards.md",
    )
    p.add_argument(
        "--pool-weights",
        type=_weights,
        default=(0.2, 0.4, 0.4),
        help="multipool: the easy,medium,hard task sets' shares of a batch (default 0.2,0.4,0.4)",
    )
    p.add_argument("--checks", type=integer(1), default=4, help="graded: sub-checks per rollout (default 4)")
    p.set_defaults(func=main)


def _learner_overrides(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    from dataclasses import fields

    from ..errors import ConfigError
    from ..simulate.learner import LearnerConfig

    types = {f.name: f.type for f in fields(LearnerConfig)}
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key not in types:
            raise ConfigError(f"--learner: unknown setting {key!r}; known: {', '.join(types)}")
        if types[key] in (str, "str"):  # step_rule: LearnerConfig checks the value itself
            out[key] = value
            continue
        if types[key] in ("float | None",) and value.lower() == "none":  # learning_rate: the rule's default
            out[key] = None
            continue
        try:
            out[key] = int(value) if types[key] in (int, "int") else float(value)
        except ValueError:
            raise ConfigError(f"--learner {key}: expected a number, got {value!r}") from None
    return out


def command_line(args: argparse.Namespace) -> str:
    """The fully explicit command that reproduces this run."""
    parts = [
        "bots",
        "simulate",
        "--tasks",
        str(args.tasks),
        "--steps",
        str(args.steps),
        "--batch",
        str(args.batch),
        "--rollouts",
        str(args.rollouts),
        "--seeds",
        str(args.seeds),
        "--first-seed",
        str(args.first_seed),
        "--methods",
        ",".join(args.methods),
        "--lam",
        f"{args.lam:g}",
        "--rho",
        f"{args.rho:g}",
        "--rho-sweep",
        ",".join(f"{v:g}" for v in args.rho_sweep) or "none",
        "--lam-sweep",
        ",".join(f"{v:g}" for v in args.lam_sweep) or "none",
        "--sampling-ablation" if args.sampling_ablation else "--no-sampling-ablation",
        "--dapo-oversample",
        f"{args.dapo_oversample:g}",
        "--groups",
        str(args.groups),
        "--eval-tasks",
        str(args.eval_tasks),
    ]
    # The selection-rule options are named only when set, so that earlier runs' commands read as before.
    if args.target != TARGET.default:
        parts += ["--target", f"{args.target:g}"]
    if args.tau != TAU.default:
        parts += ["--tau", f"{args.tau:g}"]
    parts += ["--adaptive-rho"] if args.adaptive_rho else []
    parts += ["--adaptive-lam"] if args.adaptive_lam else []
    if args.tau_sweep:
        parts += ["--tau-sweep", ",".join(f"{v:g}" for v in args.tau_sweep)]
    if args.target_sweep:
        parts += ["--target-sweep", ",".join(f"{v:g}" for v in args.target_sweep)]
    parts += ["--adaptive-ablation"] if args.adaptive_ablation else []
    if args.lag:
        parts += ["--lag", str(args.lag)]
    if args.lag_discount != LAG_DISCOUNT.default:
        parts += ["--lag-discount", f"{args.lag_discount:g}"]
    if args.lag_discount_sweep:
        parts += ["--lag-discount-sweep", ",".join(f"{v:g}" for v in args.lag_discount_sweep)]
    for key, value in args.learner:
        parts += ["--learner", f"{key}={value}"]
    for key, value in args.param:
        parts += ["--param", f"{key}={value}"]
    return shlex.join(parts)


def build_config(args: argparse.Namespace) -> Any:
    from ..errors import ConfigError
    from ..simulate.experiment import SimConfig
    from ..simulate.learner import LearnerConfig

    if args.batch > args.tasks:
        raise ConfigError(f"--batch: must be at most --tasks ({args.tasks}), got {args.batch}")
    learner = LearnerConfig(
        **{
            "num_tasks": args.tasks,
            "n_rollouts": args.rollouts,
            "num_groups": args.groups,
            "eval_tasks": args.eval_tasks,
            **_learner_overrides(args.learner),
        }
    )
    threads = None if args.threads == 0 else args.threads
    return SimConfig(
        learner=learner,
        steps=args.steps,
        batch_size=args.batch,
        seeds=tuple(range(args.first_seed, args.first_seed + args.seeds)),
        methods=tuple(args.methods),
        lam=args.lam,
        rho=args.rho,
        rho_sweep=tuple(args.rho_sweep),
        lam_sweep=tuple(args.lam_sweep),
        sampling_ablation=args.sampling_ablation,
        dapo_oversample=args.dapo_oversample,
        min_gap=args.min_gap,
        threads=threads,
        target=args.target,
        tau=args.tau,
        adaptive_rho=args.adaptive_rho,
        adaptive_lam=args.adaptive_lam,
        tau_sweep=tuple(args.tau_sweep),
        target_sweep=tuple(args.target_sweep),
        adaptive_ablation=args.adaptive_ablation,
        lag=args.lag,
        lag_discount=args.lag_discount,
        lag_discount_sweep=tuple(args.lag_discount_sweep),
        method_params=_method_params(args.param, args.methods),
    )


def _method_params(pairs: list[tuple[str, str]], methods: list[str]) -> tuple[tuple[str, Any], ...]:
    """``--param NAME=VALUE`` pairs as typed values: each read as the type the first compared
    method taking NAME declares (SimConfig checks the ranges, for every method that takes it)."""
    from ..errors import ConfigError
    from ..selector.registry import method, method_names

    out: list[tuple[str, Any]] = []
    kinds = [m for m in methods if m in method_names(aliases=True)]
    for name, text in pairs:
        param = next((p for m in kinds for p in method(m).params if p.name == name), None)
        if param is None:
            raise ConfigError(f"--param {name}: no compared method takes it (methods: {', '.join(methods)})")
        try:
            if param.type == "bool":
                if text.lower() not in ("true", "false", "1", "0"):
                    raise ValueError(text)
                value: Any = text.lower() in ("true", "1")
            else:
                value = int(text) if param.type == "int" else float(text)
        except ValueError:
            raise ConfigError(
                f"--param {name}: expected {'an' if param.type == 'int' else 'a'} {param.type}, got {text!r}"
            ) from None
        out.append((name, value))
    return tuple(out)


def main(args: argparse.Namespace) -> int:
    from ..report.simulation import GROUP_TITLES, group_rows
    from ..report.simulation_files import write_outputs
    from ..report.tables import markdown_table
    from ..simulate.experiment import run_experiment

    if args.scenario is not None:
        return _scenario(args)
    config = build_config(args)
    out = args.out or Path("runs") / time.strftime("simulate-%Y%m%d-%H%M%S")
    check_output_dir(out, "--out", overwrite=args.overwrite)  # before the run, not after it
    cmd = command_line(args)
    print(
        f"bots simulate: {config.learner.num_tasks:,} tasks, {config.steps} steps, batch "
        f"{config.batch_size}, {config.learner.n_rollouts} rollouts, seeds {list(config.seeds)}"
    )
    result = run_experiment(config, progress=not args.no_progress)
    written = write_outputs(result, out, command=cmd, plots=not args.no_plots)
    for group in result.groups:
        print(f"\n## {GROUP_TITLES.get(group, group)}\n")
        print(markdown_table(group_rows(result, group)))
    print(f"\n{len(result.runs)} runs in {result.seconds:.1f} s; wrote {len(written)} files to {out}/")
    print(f"(summary: {out / 'summary.md'})")
    return 0


def _scenario(args: argparse.Namespace) -> int:
    """``--scenario``: the scenario's arms on the same world, learner and schedule options."""
    from ..report.scenarios import scenario_table, write_scenario
    from ..simulate.scenarios import ScenarioConfig, run_scenario

    base = build_config(args)
    config = ScenarioConfig(
        args.scenario,
        learner=base.learner,
        steps=base.steps,
        batch_size=base.batch_size,
        seeds=base.seeds,
        lam=base.lam,
        rho=base.rho,
        pool_weights=tuple(args.pool_weights),
        checks=args.checks,
        threads=base.threads,
    )
    out = args.out or Path("runs") / time.strftime(f"simulate-{args.scenario}-%Y%m%d-%H%M%S")
    check_output_dir(out, "--out", overwrite=args.overwrite)
    cmd = (
        command_line(args)
        + " "
        + shlex.join(
            [
                "--scenario",
                args.scenario,
                "--pool-weights",
                ",".join(f"{w:g}" for w in args.pool_weights),
                "--checks",
                str(args.checks),
            ]
        )
    )
    start = time.perf_counter()
    runs = run_scenario(config)
    written = write_scenario(config, runs, out, cmd, plots=not args.no_plots)
    print(scenario_table(config, runs))
    print(f"\n{len(runs)} runs in {time.perf_counter() - start:.1f} s; wrote {len(written)} files to {out}/")
    return 0
