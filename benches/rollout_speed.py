"""Rollout throughput of the trainer's two engines on this machine: ``rollout_engine=hf``
(transformers' ``generate`` over ``tasks * n`` left-padded rows, the trainer's path before the
fast engine) and ``rollout_engine=fast`` (:mod:`bots_rft.llm.generation`), both through
:func:`bots_rft.train.rollout.generate_rollouts` exactly as the trainer calls it.

The prompts are reasoning-gym basic_arithmetic and chain_sum level-0 tasks with their system
prompt; each measurement samples ``n`` rollouts of ``tasks`` tasks at temperature 1 in one call
(``generation_batch_size = tasks * n``, so both engines decode every sequence together).
The engines alternate within each repetition (the first one swaps between repetitions), so
load from other processes on a shared machine falls on both alike. Tokens/s counts generated
completion tokens (up to and including EOS) per second of the call, prompt encoding included.

``--int8`` wraps the policy in LoRA adapters (r 8, every linear layer, as
``configs/smollm2_lora_cpu.yaml``) for every variant and adds ``fast+int8``: the fast engine
sampling with the int8 twin (``rollout_precision: int8``, :mod:`bots_rft.train.sampling_copy`),
built once before the timings as the trainer builds it once per run.

Writes ``benches/results/rollout_speed.json`` and ``.md`` (``rollout_speed_lora_int8.*`` with
``--int8``). Run: ``make bench-rollouts`` or ``.venv/bin/python benches/rollout_speed.py --reps 3``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"
ENGINES = ("hf", "fast")
INT8 = "fast+int8"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_flags() -> list[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                have = set(line.split(":", 1)[1].split())
                return [f for f in ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16") if f in have]
    except OSError:
        pass
    return []


def prompts(count: int) -> list[Any]:
    from bots_rft.data.gym import gym_rows

    per = (count + 1) // 2
    rows = gym_rows(["basic_arithmetic", "chain_sum"], levels=[0], per_level=per, seed=0)
    return [r["prompt"] for r in rows][:count]


def measure(
    model: Any, tok: Any, chats: list[Any], n: int, engine: str, max_new_tokens: int, seed: int, twin: Any = None
) -> dict[str, Any]:
    import torch

    from bots_rft.train.rollout import generate_rollouts

    torch.manual_seed(seed)
    t = time.perf_counter()
    ro = generate_rollouts(
        model,
        tok,
        chats,
        list(range(len(chats))),
        n,
        max_new_tokens=max_new_tokens,
        batch_size=len(chats) * n,
        engine="fast" if engine == INT8 else engine,
        sampler=twin if engine == INT8 else None,
    )
    seconds = time.perf_counter() - t
    tokens = int(ro.completion_mask.sum())
    return {
        "engine": engine,
        "tasks": len(chats),
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": tokens / seconds,
    }


def summarise(runs: list[dict[str, Any]], sizes: list[int], variants: tuple[str, ...]) -> list[dict[str, Any]]:
    out = []
    for tasks in sizes:
        row: dict[str, Any] = {"tasks": tasks}
        base = [r for r in runs if r["tasks"] == tasks and r["engine"] == "hf"]
        for engine in variants:
            mine = [r for r in runs if r["tasks"] == tasks and r["engine"] == engine]
            row[engine] = statistics.median(r["tokens_per_s"] for r in mine)
            if engine != "hf":
                # Per repetition, this variant / hf measured back to back, then the median.
                pairs = [f["tokens_per_s"] / h["tokens_per_s"] for h, f in zip(base, mine)]
                key = "speedup" if engine == "fast" else "speedup_int8"
                row[key] = statistics.median(pairs)
                row[key + "s"] = pairs
        out.append(row)
    return out


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        "# Rollout throughput: `rollout_engine` hf vs fast",
        "",
        f"{doc['date']} · {doc['cpu']} ({', '.join(doc['cpu_flags'])}) · {doc['threads']} torch thread(s) · "
        f"torch {doc['torch']} · transformers {doc['transformers']} · load average {doc['load_before']} before, "
        f"{doc['load_after']} after",
        "",
        f"Model `{doc['model']}`, {doc['rollouts']} rollouts per task, {doc['max_new_tokens']} new tokens at most, "
        f"temperature 1; medians of {doc['reps']} interleaved repetitions. Tokens/s = generated completion "
        "tokens per second of `generate_rollouts`."
        + (" Policy wrapped in LoRA (r 8, all linear layers) for every variant." if doc["int8"] else ""),
        "",
    ]
    if doc["int8"]:
        lines += [
            "| tasks × rollouts | hf tokens/s | fast tokens/s | fast+int8 tokens/s | fast / hf | fast+int8 / hf |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for row in doc["summary"]:
            lines.append(
                f"| {row['tasks']} × {doc['rollouts']} | {row['hf']:.1f} | {row['fast']:.1f} | {row[INT8]:.1f} | "
                f"{row['speedup']:.2f}× | {row['speedup_int8']:.2f}× |"
            )
    else:
        lines += ["| tasks × rollouts | hf tokens/s | fast tokens/s | fast / hf |", "|---|---:|---:|---:|"]
        for row in doc["summary"]:
            lines.append(
                f"| {row['tasks']} × {doc['rollouts']} | {row['hf']:.1f} | {row['fast']:.1f} | {row['speedup']:.2f}× |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--tasks", default="8,16", help="comma-separated task counts per call")
    ap.add_argument("--rollouts", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: steadier on a shared machine)")
    ap.add_argument("--int8", action="store_true", help="LoRA policy; add the fast engine with the int8 twin")
    ap.add_argument("--out", default=None, help="path stem for .json and .md (default: benches/results/...)")
    args = ap.parse_args(argv)

    import torch
    import transformers

    from bots_rft.train.policy import load_policy

    torch.set_num_threads(args.threads)
    sizes = [int(s) for s in args.tasks.split(",")]
    chats = prompts(max(sizes))
    model, tok = load_policy(args.model, "cpu", "auto", 0)
    variants: tuple[str, ...] = ENGINES
    twin = None
    if args.int8:
        from bots_rft.train.config import PolicyAdaptation
        from bots_rft.train.lora import adapt_policy
        from bots_rft.train.sampling_copy import int8_twin

        model = adapt_policy(model, PolicyAdaptation(lora_r=8, lora_alpha=16))
        twin = int8_twin(model)
        variants = (*ENGINES, INT8)
    load_before = round(os.getloadavg()[0], 2)
    # Warm-up: one small call per variant (first-call allocations, lazy imports).
    for engine in variants:
        measure(model, tok, chats[:2], 2, engine, 4, seed=0, twin=twin)
    runs: list[dict[str, Any]] = []
    for rep in range(args.reps):
        order = variants if rep % 2 == 0 else variants[::-1]
        for tasks in sizes:
            for engine in order:
                r = measure(model, tok, chats[:tasks], args.rollouts, engine, args.max_new_tokens, seed=rep, twin=twin)
                r["rep"] = rep
                runs.append(r)
                print(
                    f"rep {rep} tasks {tasks:3d} {engine:9s}: {r['tokens']:5d} tokens in {r['seconds']:7.1f} s "
                    f"= {r['tokens_per_s']:6.1f} tokens/s",
                    flush=True,
                )
    doc = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu_model(),
        "cpu_flags": cpu_flags(),
        "cores": os.cpu_count(),
        "threads": args.threads,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": sys.version.split()[0],
        "model": args.model,
        "rollouts": args.rollouts,
        "max_new_tokens": args.max_new_tokens,
        "reps": args.reps,
        "int8": args.int8,
        "load_before": load_before,
        "load_after": round(os.getloadavg()[0], 2),
        "runs": runs,
        "summary": summarise(runs, sizes, variants),
    }
    stem = Path(args.out) if args.out else RESULTS / ("rollout_speed_lora_int8" if args.int8 else "rollout_speed")
    write_results(stem, doc, markdown(doc))
    return 0


def write_results(stem: Path, doc: dict[str, Any], md: str) -> None:
    """``stem.json`` and ``stem.md`` (the table also printed)."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(doc, indent=2) + "\n")
    stem.with_suffix(".md").write_text(md)
    print(md)


if __name__ == "__main__":
    raise SystemExit(main())
