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
import dataclasses
import shlex
import time
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..selector.registry import METHODS
from ._args import check_output_dir, integer, parameter, real

# The other names the method table accepts ("'dapo' is dynamic"), for --methods' help.
_ALIASES = "".join(f"{alias!r} is {m.name}; " for m in METHODS.values() for alias in m.aliases)
# SimConfig's fields whose flags are written here rather than built from the field: each is set
# from several flags (learner, seeds) or from a value its flag converts (methods: names and
# aliases; threads: 0 for every core; method_params: NAME=VALUE pairs typed by the method).
_BY_HAND = ("learner", "seeds", "methods", "threads", "method_params")
# The settings every run's command names, in this order, whatever their values, so that commands
# compare line by line with those of the runs already written (summaries, docs); any other setting
# is named only where it differs from its default.
_ALWAYS_NAMED = (
    *("num_tasks", "steps", "batch_size", "n_rollouts", "seeds", "methods", "lam", "rho", "rho_sweep"),
    *("lam_sweep", "sampling_ablation", "dapo_oversample", "num_groups", "eval_tasks"),
)


def _many(one: Callable[[str], Any]) -> Callable[[str], tuple[Any, ...]]:
    """A parser of comma-separated values, each read by ``one``, or 'none'."""

    def parse(text: str) -> tuple[Any, ...]:
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


def _sim_config() -> Any:
    """:class:`~bots_rft.simulate.SimConfig`, looked up when used (so that the flags follow the
    class the simulator defines at that moment)."""
    from ..simulate import experiment

    return experiment.SimConfig


def _flagged(cls: Any, *, every: bool) -> Iterator[tuple[dataclasses.Field[Any], Any]]:
    """The fields of the config class ``cls`` that get a flag built from them, with their types:
    with ``every``, all but :data:`_BY_HAND` (a field without a doc is refused: it would have no
    help to show); else only those declared with a doc."""
    types = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if every and f.name in _BY_HAND:
            continue
        if "doc" not in f.metadata:
            if not every:
                continue
            raise TypeError(
                f"{cls.__name__}.{f.name} has no doc for its `bots simulate` flag: declare it with "
                "bots_rft.simulate.fields.documented(doc, default, ...)"
            )
        yield f, types[f.name]


def _flag(f: dataclasses.Field[Any]) -> str:
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _shown(value: Any) -> str:
    """A default as the help shows it."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, tuple):
        return ",".join(_number(v) for v in value) or "none"
    return f"{value:,}" if isinstance(value, int) else _number(value)


def _add_flag(p: argparse.ArgumentParser, f: dataclasses.Field[Any], kind: Any) -> None:
    """The flag of field ``f`` (of type ``kind``): its name, type and default from the field, its
    help from the field's doc."""
    meta = f.metadata
    help_text = f"{meta['doc']} (default {_shown(f.default)})".replace("%", "%%")
    if kind is bool:
        p.add_argument(_flag(f), dest=f.name, action=argparse.BooleanOptionalAction, default=f.default, help=help_text)
        return
    item = typing.get_args(kind)[0] if typing.get_origin(kind) is tuple else kind
    if meta["param"] is not None:
        one: Any = parameter(meta["param"])
    elif item is int:
        one = integer(meta["minimum"])
    elif item is float:
        one = real()
    elif item is str:
        one = str
    else:
        raise TypeError(f"{f.name}: `bots simulate` has no flag for a field of type {kind}")
    parse = _many(one) if typing.get_origin(kind) is tuple else one
    # The metavar names the flag, not the field (--batch BATCH).
    metavar = (
        _flag(f)[2:].upper().replace("-", "_") if meta["choices"] is None else "{" + ",".join(meta["choices"]) + "}"
    )
    p.add_argument(
        _flag(f), dest=f.name, type=parse, choices=meta["choices"], metavar=metavar, default=f.default, help=help_text
    )


def _words(f: dataclasses.Field[Any], value: Any) -> list[str]:
    """Field ``f`` set to ``value``, as the flag that sets it."""
    if isinstance(value, bool):
        return [_flag(f) if value else "--no-" + _flag(f)[2:]]
    if isinstance(value, tuple):
        return [_flag(f), ",".join(_number(v) for v in value) or "none"]
    return [_flag(f), _number(value)]


def _add_by_hand(p: argparse.ArgumentParser, name: str, default: Any) -> None:
    """The flags of the :data:`_BY_HAND` field ``name`` (whose default is ``default``)."""
    if name == "learner":
        from ..simulate.learner import LearnerConfig

        for f, kind in _flagged(LearnerConfig, every=False):
            _add_flag(p, f, kind)
        p.add_argument(
            "--learner",
            type=_override,
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="override a simulator setting (see docs/what-bots-does.md), repeatable",
        )
    elif name == "seeds":
        p.add_argument(
            "--seeds", type=integer(1), default=len(default), help=f"number of seeds (default {len(default)})"
        )
        p.add_argument("--first-seed", type=integer(0), default=default[0], help=f"first seed (default {default[0]})")
    elif name == "methods":
        p.add_argument(
            "--methods",
            type=_names,
            default=default,
            help=f"comma-separated, from {', '.join(METHODS)} ({_ALIASES}default {','.join(default)}); "
            "the peers from the literature (dps, greso, speed, adarft, knapsack, reinforce-ada) are "
            "described in docs/peers.md",
        )
    elif name == "threads":
        p.add_argument(
            "--threads",
            type=integer(0, 1024),
            default=default or 0,
            help=f"threads of the BOTS core, 0 = every core (default {default or 0})",
        )
    elif name == "method_params":
        p.add_argument(
            "--param",
            type=_override,
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="a method parameter (e.g. momentum, step_size, gen_ratio) for every compared method that takes "
            "it, repeatable",
        )
    else:
        raise AssertionError(name)


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "simulate",
        help="reproduce the paper's comparisons on a simulated learner (tables, plots, CSV)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sim_config = _sim_config()
    flagged = dict((f.name, (f, kind)) for f, kind in _flagged(sim_config, every=True))
    for f in dataclasses.fields(sim_config):
        if f.name in flagged:
            _add_flag(p, *flagged[f.name])
        else:
            default = f.default_factory() if f.default is dataclasses.MISSING else f.default  # type: ignore[misc,operator]
            _add_by_hand(p, f.name, default)
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
    from ..errors import ConfigError
    from ..simulate.learner import LearnerConfig

    types = {f.name: f.type for f in dataclasses.fields(LearnerConfig)}
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


def _named_fields() -> dict[str, dataclasses.Field[Any]]:
    """Every field whose flag is built from it, the learner's and the experiment's, by name."""
    from ..simulate.learner import LearnerConfig

    learner = {f.name: f for f, _ in _flagged(LearnerConfig, every=False)}
    return learner | {f.name: f for f, _ in _flagged(_sim_config(), every=True)}


def command_line(args: argparse.Namespace) -> str:
    """The fully explicit command that reproduces this run."""
    named = _named_fields()
    by_hand = {
        "seeds": ["--seeds", str(args.seeds), "--first-seed", str(args.first_seed)],
        "methods": ["--methods", ",".join(args.methods)],
    }
    parts = ["bots", "simulate"]
    for name in _ALWAYS_NAMED:
        parts += by_hand[name] if name in by_hand else _words(named[name], getattr(args, name))
    for name, f in named.items():
        if name not in _ALWAYS_NAMED and getattr(args, name) != f.default:
            parts += _words(f, getattr(args, name))
    for key, value in args.learner:
        parts += ["--learner", f"{key}={value}"]
    for key, value in args.param:
        parts += ["--param", f"{key}={value}"]
    return shlex.join(parts)


def build_config(args: argparse.Namespace) -> Any:
    from ..errors import ConfigError
    from ..simulate.learner import LearnerConfig

    if args.batch_size > args.num_tasks:
        raise ConfigError(f"--batch: must be at most --tasks ({args.num_tasks}), got {args.batch_size}")
    learner_fields = {f.name: getattr(args, f.name) for f, _ in _flagged(LearnerConfig, every=False)}
    learner = LearnerConfig(**{**learner_fields, **_learner_overrides(args.learner)})
    sim_config = _sim_config()
    return sim_config(
        learner=learner,
        seeds=tuple(range(args.first_seed, args.first_seed + args.seeds)),
        methods=tuple(args.methods),
        threads=None if args.threads == 0 else args.threads,
        method_params=_method_params(args.param, args.methods),
        **{f.name: getattr(args, f.name) for f, _ in _flagged(sim_config, every=True)},
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
