"""``bots embed``: one embedding vector per task of a pool, from a causal LM's last hidden state
over the task's prompt (resumable), written as a safetensors file keyed by task id."""

from __future__ import annotations

import argparse
from typing import Any

from ._args import add_model_options, check_input, check_output_file, integer


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "embed",
        help="task embeddings: each prompt's mean last hidden state under a model, for bots-embed and bots-sim",
        description="Run each task's prompt (rendered as training renders it: the pool's chat, --system-prompt, "
        "the chat template, --max-prompt-tokens) through MODEL once and write the mean of its last hidden "
        "state over the prompt's tokens (float32) to OUT, a safetensors file keyed by task id. Resumable: "
        "progress is kept in <out>.progress/ after every chunk of tasks.",
    )
    add_model_options(p)
    p.add_argument("--pool", required=True, help="pool file (parquet or JSONL)")
    p.add_argument("--out", required=True, help="embeddings file to write (.safetensors), new unless --overwrite")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    p.add_argument("--batch-size", type=integer(1), default=64, help="prompts per forward pass (default: %(default)s)")
    p.add_argument(
        "--system-prompt", default=None, help="replace the pool's system message ('' drops it); use what training uses"
    )
    p.add_argument(
        "--max-prompt-tokens",
        type=integer(1),
        default=1024,
        help="longer prompts keep their end, as in training (default: %(default)s, the trainer's)",
    )
    p.add_argument(
        "--dim",
        type=integer(1),
        default=None,
        help="reduce to D dimensions by PCA over the pool's embeddings (default: the model's hidden size)",
    )
    p.add_argument(
        "--chunk-tasks",
        type=integer(1),
        default=None,
        help="tasks per progress file (default: 16 x batch-size)",
    )
    p.add_argument("--limit", type=integer(1), default=None, help="only the first N tasks")
    p.add_argument("--seed", type=integer(0), default=0, help="the tiny random model's weights (default: 0)")
    p.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda, cuda:1, ...")
    p.add_argument("--dtype", default="auto", help="auto (bf16 on CUDA, fp32 on CPU), float32, bfloat16, float16")
    p.add_argument("--restart", action="store_true", help="discard existing progress")
    p.add_argument("--keep-progress", action="store_true", help="keep the progress folder after writing OUT")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_run, needs=("pyarrow", "torch", "transformers"))


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..errors import InvalidArgumentError
    from ..train.embed import EmbedConfig, run_embed

    check_input(args.pool, "--pool", directory_ok=True)
    if args.adapter is not None:
        check_input(args.adapter, "--adapter", directory_ok=True)
    if Path(args.out).absolute() == Path(args.pool).absolute():
        raise InvalidArgumentError(f"--out: {args.out!r} is the pool itself; choose another file", "--out")
    check_output_file(args.out, "--out", overwrite=args.overwrite)
    cfg = EmbedConfig(
        model=args.model,
        adapter=args.adapter,
        pool=args.pool,
        out=args.out,
        batch_size=args.batch_size,
        max_prompt_tokens=args.max_prompt_tokens,
        system_prompt=args.system_prompt,
        dim=args.dim,
        chunk_tasks=args.chunk_tasks,
        limit=args.limit,
        seed=args.seed,
        device=args.device,
        dtype=args.dtype,
        restart=args.restart,
        keep_progress=args.keep_progress,
    )
    summary = run_embed(cfg, progress=not args.no_progress)
    print(f"bots embed: {summary.line()}")
    return 0
