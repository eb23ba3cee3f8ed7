"""What trial 3 commits of its runs beside held_out.csv, so that anyone can audit a run or find
where a rerun diverges: every run's per-step picks, successes and loss (steps.jsonl.gz) and the
machine and library stack of every start and resume of every run (machines.json).

    python examples/trial3/collect.py --runs runs/trial3 --out docs/trial3
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

from bots_rft.train.logger import read_metrics

STEP_KEYS = ("step", "task_ids", "successes", "loss", "capability", "cum_rollouts")


def collect(runs: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    steps: list[dict[str, Any]] = []
    machines: dict[str, Any] = {}
    for method_dir in sorted(p for p in runs.iterdir() if p.is_dir() and any(p.glob("seed*/metrics.jsonl"))):
        for run in sorted(method_dir.glob("seed*"), key=lambda p: int(p.name.removeprefix("seed"))):
            path = run / "metrics.jsonl"
            if not path.exists():
                continue
            records = read_metrics(path)
            seed = int(run.name.removeprefix("seed"))
            label = f"{method_dir.name}/seed{seed}"
            machines[label] = [
                {
                    "step": r.get("step"),
                    "resumed_from": r.get("resumed_from"),
                    "machine": r.get("machine"),
                    "machine_changed": r.get("machine_changed"),
                    "embeddings": r.get("embeddings"),
                }
                for r in records
                if r.get("kind") == "config"
            ]
            for r in records:
                if r.get("kind") == "train":
                    steps.append({"method": method_dir.name, "seed": seed, **{k: r.get(k) for k in STEP_KEYS}})
    return steps, machines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", required=True, help="the comparison's OUT directory (OUT/<method>/seed<k>/metrics.jsonl)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    runs = Path(args.runs)
    if not runs.is_dir():
        print(f"collect: --runs: no directory {str(runs)!r}", file=sys.stderr)
        return 2
    steps, machines = collect(runs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    # mtime=0: the same runs give the same bytes.
    with open(out / "steps.jsonl.gz", "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        for row in steps:
            f.write((json.dumps(row, separators=(",", ":")) + "\n").encode())
    (out / "machines.json").write_text(json.dumps(machines, indent=1) + "\n", encoding="utf-8")
    print(f"collect: {len(machines)} runs, {len(steps)} steps -> {out / 'steps.jsonl.gz'}, {out / 'machines.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
