"""``bots refeval``'s sampling throughput against a plain fp32 ``generate`` on this machine.

Three ways to sample ``rollouts`` responses for each of ``tasks`` prompts, ``batch`` sequences
per call (``--rollouts 4 --batch-size 16``: 4 tasks a call, as ``bots refeval`` chunks them):

- ``generate``: transformers' ``model.generate(do_sample=True, top_k=0, num_return_sequences=n)``
  on the chat-templated prompts, left-padded, fp32: what a user would write by hand;
- ``refeval fast`` / ``refeval speculative`` / ``refeval hf``:
  :func:`bots_rft.train.refeval.sample_responses`, the sampling ``bots refeval`` runs, with each
  engine: the shared-prefix KV-cache decode loop (the default), that loop with speculative sampling
  from a bfloat16 draft, and transformers' ``generate``.

The four alternate within each repetition (the order reverses between repetitions), so load
from other processes on a shared machine falls on all alike. Tokens/s counts generated completion
tokens (up to and including EOS) per second of the calls, prompt encoding included. Afterwards
one end-to-end ``bots refeval`` run per engine (``run_refeval`` on the same prompts, scoring
included) reports its own tokens/s.

Writes ``benches/results/refeval_speed.json`` and ``.md``. Run: ``make bench-rollouts`` or
``.venv/bin/python benches/refeval_speed.py``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from rollout_speed import cpu_flags, cpu_model, write_results  # noqa: E402

RESULTS = Path(__file__).parent / "results"
VARIANTS = ("generate", "refeval fast", "refeval speculative", "refeval hf")


def _rows(count: int) -> list[dict[str, Any]]:
    from bots_rft.data.gym import gym_rows

    per = (count + 1) // 2
    return gym_rows(["basic_arithmetic", "chain_sum"], levels=[0], per_level=per, seed=0)[:count]


def _plain_generate(model: Any, tok: Any, chats: list[Any], n: int, max_new_tokens: int) -> int:
    """Generated tokens of one plain ``generate`` call (what a user writes without bots-rft)."""
    import torch

    texts = [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in chats]
    enc = tok(texts, return_tensors="pt", padding=True)
    with torch.inference_mode():
        out = model.generate(
            **enc,
            do_sample=True,
            top_k=0,
            temperature=1.0,
            num_return_sequences=n,
            max_new_tokens=max_new_tokens,
            pad_token_id=tok.pad_token_id,
        )
    completion = out[:, enc["input_ids"].shape[1] :]
    eos = model.generation_config.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos])
    tokens = 0
    for row in completion.tolist():
        for t in row:
            tokens += 1
            if t in eos_ids:
                break
    return tokens


def measure(
    variant: str, model: Any, tok: Any, chats: list[Any], n: int, batch: int, max_new_tokens: int, seed: int
) -> dict[str, Any]:
    import torch

    from bots_rft.train.refeval import sample_responses

    torch.manual_seed(seed)
    per_call = max(1, batch // n)
    tokens = 0
    t = time.perf_counter()
    for s in range(0, len(chats), per_call):
        part = chats[s : s + per_call]
        if variant == "generate":
            tokens += _plain_generate(model, tok, part, n, max_new_tokens)
        else:
            _, got = sample_responses(
                model, tok, part, n, max_new_tokens=max_new_tokens, batch_size=batch, engine=variant.split()[1]
            )
            tokens += got
    seconds = time.perf_counter() - t
    return {"variant": variant, "tokens": tokens, "seconds": seconds, "tokens_per_s": tokens / seconds}


def end_to_end(model_spec: str, rows: list[dict[str, Any]], n: int, batch: int, max_new_tokens: int) -> dict[str, Any]:
    """One ``bots refeval`` run per engine on ``rows``: its own tokens/s (sampling and scoring)."""
    from bots_rft.data import TaskPool
    from bots_rft.train.refeval import RefEvalConfig, run_refeval

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        pool = Path(tmp) / "pool.parquet"
        TaskPool.from_records(rows).to_parquet(pool)
        for engine in ("fast", "speculative", "hf"):
            cfg = RefEvalConfig(
                model=model_spec,
                pool=str(pool),
                column=f"rate_{engine}",
                rollouts=n,
                batch_size=batch,
                max_new_tokens=max_new_tokens,
                engine=engine,
                device="cpu",
                workers=0,
            )
            summary = run_refeval(cfg, progress=False)
            out[engine] = {
                "tokens": summary.generated_tokens,
                "sampling_seconds": summary.sampling_seconds,
                "tokens_per_s": summary.tokens_per_s,
            }
    return out


def markdown(doc: dict[str, Any]) -> str:
    s = doc["summary"]
    lines = [
        "# `bots refeval` sampling vs a plain fp32 `generate`",
        "",
        f"{doc['date']} · {doc['cpu']} ({', '.join(doc['cpu_flags'])}) · {doc['threads']} torch thread(s) · "
        f"load average {doc['load_before']} before, {doc['load_after']} after",
        "",
        f"Model `{doc['model']}` (fp32), {doc['tasks']} tasks × {doc['rollouts']} rollouts, {doc['batch']} sequences "
        f"a call, {doc['max_new_tokens']} new tokens at most, temperature 1; medians of {doc['reps']} interleaved "
        "repetitions.",
        "",
        "| variant | tokens/s | ÷ plain generate |",
        "|---|---:|---:|",
    ]
    for v in VARIANTS:
        lines.append(f"| {v} | {s[v]['tokens_per_s']:.1f} | {s[v]['ratio']:.2f}× |")
    e2e = doc["end_to_end"]
    lines += [
        "",
        "End to end (`run_refeval`, scoring included): "
        + ", ".join(f"{e} {e2e[e]['tokens_per_s']:.1f} tokens/s" for e in ("fast", "speculative", "hf"))
        + ".",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--rollouts", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1: steadier on a shared machine)")
    ap.add_argument("--out", default=None, help="path stem for .json and .md (default: benches/results/refeval_speed)")
    args = ap.parse_args(argv)

    import torch

    from bots_rft.data import TaskPool
    from bots_rft.llm.models import load_model

    torch.set_num_threads(args.threads)
    rows = _rows(args.tasks)
    chats = TaskPool.from_records(rows).prompts(list(range(len(rows))))
    model, tok = load_model(args.model, device="cpu", dtype="float32")
    load_before = round(os.getloadavg()[0], 2)
    for v in VARIANTS:  # warm-up: first-call allocations, lazy imports
        measure(v, model, tok, chats[:1], 2, 2, 4, seed=0)
    runs: list[dict[str, Any]] = []
    for rep in range(args.reps):
        for v in VARIANTS if rep % 2 == 0 else VARIANTS[::-1]:
            r = measure(v, model, tok, chats, args.rollouts, args.batch_size, args.max_new_tokens, seed=rep)
            r["rep"] = rep
            runs.append(r)
            print(
                f"rep {rep} {v:13s}: {r['tokens']:5d} tokens in {r['seconds']:6.1f} s = {r['tokens_per_s']:6.1f} tokens/s",
                flush=True,
            )
    summary: dict[str, Any] = {}
    for v in VARIANTS:
        mine = [r for r in runs if r["variant"] == v]
        base = [r for r in runs if r["variant"] == "generate"]
        summary[v] = {
            "tokens_per_s": statistics.median(r["tokens_per_s"] for r in mine),
            # per repetition, against plain generate measured in the same repetition, then the median
            "ratio": statistics.median(m["tokens_per_s"] / b["tokens_per_s"] for m, b in zip(mine, base)),
        }
    doc = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": cpu_model(),
        "cpu_flags": cpu_flags(),
        "threads": args.threads,
        "model": args.model,
        "tasks": args.tasks,
        "rollouts": args.rollouts,
        "batch": args.batch_size,
        "max_new_tokens": args.max_new_tokens,
        "reps": args.reps,
        "load_before": load_before,
        "runs": runs,
        "summary": summary,
        "end_to_end": end_to_end(args.model, rows, args.rollouts, args.batch_size, args.max_new_tokens),
        "load_after": round(os.getloadavg()[0], 2),
    }
    write_results(Path(args.out) if args.out else RESULTS / "refeval_speed", doc, markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
