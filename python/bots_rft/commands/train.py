"""``bots train``: GRPO reinforcement finetuning with task selection (BOTS or a baseline).

Reads a YAML or TOML config (see configs/), applies KEY=VALUE overrides, and trains on CUDA when
present (bf16 autocast), else CPU. Under ``torchrun --nproc-per-node K`` the K processes train
data-parallel (DDP; ``distributed=fsdp`` shards the model); rank 0 owns the selector.
Writes OUT_DIR/metrics.jsonl (per step and per evaluation) and checkpoints under
OUT_DIR/checkpoints; ``--resume`` continues from the latest one exactly (on the same pool, or
with ``--extend-pool`` on one with added tasks). An OUT_DIR holding another run is refused unless
``--resume`` or ``--overwrite``.

Exit status: 0 done; 2 bad input; 3 a step's verifications were all verifier errors (threshold
verifier_error_stop); 128+N stopped by signal N (143 SIGTERM, 130 SIGINT). Before 3 and 128+N
the last finished step is checkpointed, and the message names it.
"""

from __future__ import annotations

import argparse

from ..selector.registry import METHODS


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "train",
        help="GRPO finetuning with BOTS (or a baseline) choosing the tasks",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", default=None, help="YAML (.yaml/.yml) or TOML (.toml) config file")
    p.add_argument(
        "--model", default=None, help="smollm2 | tiny | tiny-HxL | a local HF directory (overrides the config)"
    )
    p.add_argument("--method", default=None, help=" | ".join(METHODS) + " (overrides the config)")
    p.add_argument("--out", default=None, help="output directory (config key out_dir)")
    p.add_argument("--resume", action="store_true", help="continue from OUT_DIR/checkpoints/latest")
    p.add_argument("--overwrite", action="store_true", help="replace a previous run in OUT_DIR")
    p.add_argument(
        "--extend-pool",
        action="store_true",
        help="with --resume: the pool may have gained tasks (they start at the prior); none may be removed",
    )
    p.add_argument("--no-progress", action="store_true")
    p.add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved config (every key, YAML, usable as --config) and exit",
    )
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides, e.g. steps=30 lr=1e-5")
    p.set_defaults(func=main, needs=("pydantic", "yaml", "pyarrow", "torch", "transformers"))


def config_from_args(args: argparse.Namespace) -> object:
    from ..train.config import load_config, parse_overrides

    extra = parse_overrides(list(args.overrides))
    for key, value in (("model", args.model), ("method", args.method), ("out_dir", args.out)):
        if value is not None:
            extra[key] = value
    for flag in ("resume", "overwrite", "extend_pool"):
        if getattr(args, flag, False):
            extra[flag] = True
    if args.no_progress:
        extra["progress"] = False
    return load_config(args.config, extra)


def config_yaml(cfg: object) -> str:
    """Every key of a config with its value, as YAML that ``--config`` reads back."""
    import yaml  # type: ignore[import-untyped]

    from ..train.config import TrainConfig

    assert isinstance(cfg, TrainConfig)
    return str(yaml.safe_dump(cfg.to_dict(), sort_keys=False, allow_unicode=True))


def main(args: argparse.Namespace) -> int:
    import json

    cfg = config_from_args(args)
    if args.print_config:
        print(config_yaml(cfg), end="")
        return 0
    from ._args import check_training_config

    check_training_config(cfg)
    import sys

    from ..train.stops import EXIT_VERIFIER_ERRORS, VerifierErrorStop, exit_status_for_signal, signal_name
    from ..train.trainer import train

    try:
        result = train(cfg)  # type: ignore[arg-type]
    except VerifierErrorStop as exc:
        print(f"bots train: stopped: {exc}", file=sys.stderr)
        return EXIT_VERIFIER_ERRORS
    if result.final_eval is not None:
        print(json.dumps({"step": result.steps_done, "held_out": result.final_eval}, indent=None))
    errors = ""
    if result.verifier_errors:
        kinds = ", ".join(f"{k}: {n}" for k, n in result.verifier_error_kinds.items())
        errors = f"; {result.verifier_errors} verifier error(s) scored as failures ({kinds})"
    if result.interrupted and result.signal is not None:
        print(
            f"bots train: stopped by {signal_name(result.signal)}; checkpoint of step {result.steps_done} saved in "
            f"{result.checkpoint}; continue with --resume{errors}",
            file=sys.stderr,
        )
        return exit_status_for_signal(result.signal)
    print(f"bots train: done after step {result.steps_done}; metrics in {result.metrics_path}{errors}")
    return 0
