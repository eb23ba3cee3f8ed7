"""``bots refeval``: measure each task's pass rate under a reference model and store it as a
difficulty column of the pool (resumable)."""

from __future__ import annotations

import argparse
from typing import Any

from ._args import add_model_options, check_input, check_output_file, integer, real


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "refeval",
        help="reference pass rates of a model on a pool, written as a difficulty column",
        description="Sample ROLLOUTS responses per task from MODEL (temperature 1.0), score them with the "
        "pool's verifiers and write each task's pass rate as column NAME. Resumable: progress is "
        "kept in <out>.<NAME>.progress.jsonl after every chunk of tasks.",
    )
    add_model_options(p)
    p.add_argument("--pool", required=True, help="pool file (parquet or JSONL)")
    p.add_argument("--column", required=True, help="difficulty column to write, e.g. smollm2_135m_pass_rate")
    p.add_argument("--rollouts", type=integer(1), default=16, help="samples per task (default: %(default)s)")
    p.add_argument(
        "--out", default=None, help="output pool file, new unless --overwrite (default: update --pool in place)"
    )
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.add_argument("--max-new-tokens", type=integer(1), default=512, help="(default: %(default)s)")
    p.add_argument(
        "--max-prompt-tokens",
        type=integer(1),
        default=4096,
        help="longer prompts keep their end (default: %(default)s)",
    )
    p.add_argument(
        "--system-prompt", default=None, help="replace the pool's system message ('' drops it); use what training uses"
    )
    p.add_argument("--temperature", type=real(0, low_open=True), default=1.0, help="(default: %(default)s)")
    p.add_argument("--top-p", type=real(0, 1, low_open=True), default=1.0, help="(default: %(default)s)")
    p.add_argument(
        "--batch-size", type=integer(1), default=64, help="sequences per generate call (default: %(default)s)"
    )
    p.add_argument(
        "--chunk-tasks",
        type=integer(1),
        default=None,
        help="tasks per progress flush (default: batch-size // rollouts)",
    )
    p.add_argument(
        "--engine",
        choices=("fast", "speculative", "hf"),  # train.refeval.REFEVAL_ENGINES (not imported: CLI start-up)
        default="fast",
        help="fast: the shared-prefix KV-cache decode loop; speculative: that loop with a bfloat16 draft proposing "
        "tokens the model accepts or replaces; hf: transformers' generate, the reference. All sample the same "
        "distribution (default: %(default)s)",
    )
    p.add_argument("--limit", type=integer(1), default=None, help="only the first N tasks")
    p.add_argument("--seed", type=integer(0), default=0)
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda, cuda:1, ...")
    p.add_argument("--dtype", default="auto", help="auto (bf16 on CUDA, fp32 on CPU), float32, bfloat16, float16")
    p.add_argument(
        "--workers",
        type=integer(0),
        default=None,
        help="reward worker processes, 0 = in-process (default: min(2, CPUs))",
    )
    p.add_argument(
        "--reward-timeout",
        type=real(0, low_open=True),
        default=30.0,
        help="seconds per response (default: %(default)s)",
    )
    p.add_argument("--restart", action="store_true", help="discard an existing progress file")
    p.add_argument("--keep-progress", action="store_true", help="keep the progress file after writing the pool")
    p.set_defaults(func=_run, needs=("pyarrow", "torch", "transformers"))


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..train.refeval import RefEvalConfig, run_refeval

    check_input(args.pool, "--pool", directory_ok=True)
    if args.adapter is not None:
        check_input(args.adapter, "--adapter", directory_ok=True)
    if args.out is not None and Path(args.out).absolute() != Path(args.pool).absolute():
        check_output_file(args.out, "--out", overwrite=args.overwrite)
    else:
        check_output_file(args.pool, "--pool", overwrite=True)  # written back in place
    cfg = RefEvalConfig(
        model=args.model,
        adapter=args.adapter,
        pool=args.pool,
        column=args.column,
        rollouts=args.rollouts,
        out=args.out,
        max_new_tokens=args.max_new_tokens,
        max_prompt_tokens=args.max_prompt_tokens,
        system_prompt=args.system_prompt,
        temperature=args.temperature,
        top_p=args.top_p,
        batch_size=args.batch_size,
        engine=args.engine,
        chunk_tasks=args.chunk_tasks,
        limit=args.limit,
        seed=args.seed,
        device=args.device,
        dtype=args.dtype,
        workers=args.workers,
        reward_timeout=args.reward_timeout,
        restart=args.restart,
        keep_progress=args.keep_progress,
    )
    summary = run_refeval(cfg)
    for line in summary.lines():
        print(line)
    return 0
