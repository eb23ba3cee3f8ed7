"""Where two runs of the same config part: the first training step whose picks (``task_ids``),
rewards (``successes``) or loss differ between two run logs (each a ``metrics.jsonl``, or a
gzipped ``steps.jsonl.gz`` of a trial with ``--method``/``--seed``), the first evaluation that
differs, and the machine and library stack each log recorded.

    python examples/trial/diverge.py RUN_A/metrics.jsonl RUN_B/metrics.jsonl

What it tells apart: picks that differ after identical successes are the selection path or what
it reads (the reference columns, the config: the selection itself is bit-identical given the same
inputs and rewards); successes that differ after identical picks are
sampled tokens (the policy's float arithmetic); a loss that differs in its last bits while picks
and successes agree is the arithmetic itself, before any token has changed. Exit status 0 when the
logs agree on every step both have, 1 when they part, 2 on bad input.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

COMPARED = ("task_ids", "successes", "loss")


def read_log(path: Path, method: str | None = None, seed: int | None = None) -> list[dict[str, Any]]:
    """The records of a run log; from a trial's steps.jsonl.gz, the rows of ``method`` and ``seed``
    (as train records)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    if path.suffix != ".gz":
        return rows
    picked = [r for r in rows if r.get("method") == method and r.get("seed") == seed]
    return [{"kind": "train", **r} for r in picked]


def by_step(records: list[dict[str, Any]], kind: str) -> dict[int, dict[str, Any]]:
    """The last record of ``kind`` at each step (a resumed run logs the steps after its checkpoint
    again; the later record is the one the run went on from)."""
    return {int(r["step"]): r for r in records if r.get("kind") == kind and "step" in r}


def first_divergence(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    """The first training step at which each compared field differs (None where it never does),
    the steps both logs have, and the first evaluation whose accuracy differs."""
    ta, tb = by_step(a, "train"), by_step(b, "train")
    common = sorted(set(ta) & set(tb))
    first: dict[str, Any] = dict.fromkeys(COMPARED)
    detail: dict[str, Any] = {}
    for step in common:
        for key in COMPARED:
            if first[key] is None and ta[step].get(key) != tb[step].get(key):
                first[key] = step
                detail[key] = {"a": ta[step].get(key), "b": tb[step].get(key)}
    ea, eb = by_step(a, "eval"), by_step(b, "eval")
    evals = sorted(set(ea) & set(eb))
    eval_first = next(
        (
            s
            for s in evals
            if (ea[s].get("accuracy"), ea[s].get("greedy_accuracy"))
            != (eb[s].get("accuracy"), eb[s].get("greedy_accuracy"))
        ),
        None,
    )
    return {
        "steps_compared": [common[0], common[-1]] if common else None,
        "first": first,
        "detail": detail,
        "evaluations_compared": evals,
        "first_eval": eval_first,
    }


def machines(records: list[dict[str, Any]]) -> list[Any]:
    """Each start's and resume's recorded machine (logs from before machine records: none)."""
    return [r.get("machine") for r in records if r.get("kind") == "config"]


def describe(result: dict[str, Any]) -> str:
    first = result["first"]
    if result["steps_compared"] is None:
        return "no training step in both logs"
    lo, hi = result["steps_compared"]
    if all(v is None for v in first.values()):
        agree = f"identical picks, successes and loss at every step {lo}-{hi}"
    else:
        parts = [f"{k} first differ at step {v}" for k, v in first.items() if v is not None]
        same = [k for k, v in first.items() if v is None]
        agree = "; ".join(parts) + (f"; {', '.join(same)} identical throughout {lo}-{hi}" if same else "")
        picks, succ, loss = first["task_ids"], first["successes"], first["loss"]
        if loss is not None and (picks is None or loss < picks) and (succ is None or loss < succ):
            agree += " (the loss parted first, with the same picks and successes: the arithmetic differs)"
        elif succ is not None and (picks is None or succ < picks):
            agree += " (successes parted before picks: a sampled token differs)"
        elif picks is not None and (succ is None or picks <= succ):
            agree += (
                " (picks parted with identical successes before them: the selection or what it reads differs,"
                " e.g. a reference column)"
            )
    ev = result["first_eval"]
    evals = result["evaluations_compared"]
    tail = (
        f"; evaluations identical at {', '.join(map(str, evals))}"
        if ev is None
        else f"; first evaluation that differs: step {ev}"
    )
    return agree + (tail if evals else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", help="a run's metrics.jsonl (or a trial's steps.jsonl.gz)")
    p.add_argument("b", help="the other run's")
    p.add_argument("--method", help="with a steps.jsonl.gz: the run's method")
    p.add_argument("--seed", type=int, help="with a steps.jsonl.gz: the run's seed")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    args = p.parse_args(argv)
    logs = []
    for name, value in (("a", args.a), ("b", args.b)):
        path = Path(value)
        if not path.is_file():
            print(f"diverge: {name}: no file {value!r}", file=sys.stderr)
            return 2
        if path.suffix == ".gz" and (args.method is None or args.seed is None):
            print(f"diverge: {name}: a steps.jsonl.gz needs --method and --seed", file=sys.stderr)
            return 2
        try:
            logs.append(read_log(path, args.method, args.seed))
        except (OSError, ValueError) as exc:
            print(f"diverge: {name}: cannot read {value!r} ({exc})", file=sys.stderr)
            return 2
    result = first_divergence(*logs)
    result["machines"] = {"a": machines(logs[0]), "b": machines(logs[1])}
    print(json.dumps(result, indent=1, default=str) if args.json else f"diverge: {describe(result)}")
    return 0 if all(v is None for v in result["first"].values()) and result["first_eval"] is None else 1


if __name__ == "__main__":
    sys.exit(main())
