"""What bots-embed's implicit evidence costs next to the selector's own step: one update of
:class:`bots_rft.estimators.EmbeddingRegression` (its fit on the batch and its prediction of every
task) at N tasks and d dimensions, beside one BOTS step (update + select) without implicit
evidence and one with it, in the same process and run, so the ratios travel between machines.
Writes estimators.json and estimators.md to --out (default benches/results).

    python benches/estimators.py                  # N = 10^6, d = 64 and 256, B = 256
    python benches/estimators.py --quick          # a smoke run: N = 20,000
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bots_rft import BOTS, _core  # noqa: E402
from bots_rft.estimators import EmbeddingRegression  # noqa: E402
from common import core_count, cpu_model  # noqa: E402

BATCH = 256
ROLLOUTS = 16


def _timed(fn: Any, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def measure(n: int, dims: list[int], repeats: int, threads: int | None) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    rows = []
    plain = BOTS(n, seed=0, threads=threads)

    def step(sel: BOTS) -> None:
        ids = sel.select(BATCH)
        sel.update(ids, rng.integers(0, ROLLOUTS + 1, BATCH).astype(np.float64), ROLLOUTS)
        sel.flush()

    step(plain)  # warm-up: thread pool, first allocations
    base = _timed(lambda: step(plain), repeats)
    for d in dims:
        emb = rng.normal(size=(n, d)).astype(np.float32)
        t = time.perf_counter()
        est = EmbeddingRegression(emb)
        build = time.perf_counter() - t
        ids = np.sort(rng.choice(n, BATCH, replace=False))
        batch = _core.aggregate(n, ids, rng.integers(0, ROLLOUTS + 1, BATCH).astype(np.float64), np.full(BATCH, 16.0))
        fit = _timed(lambda e=est, b=batch: e.fit_step(b.ids, b.successes, b.trials), repeats)
        weights, _ = est.fit_step(batch.ids, batch.successes, batch.trials)
        predict = _timed(lambda e=est, w=weights: e.predict_weights(w), repeats)
        sel = BOTS(n, evidence=est, seed=0, threads=threads)
        step(sel)
        with_evidence = _timed(lambda s=sel: step(s), repeats)
        med = statistics.median
        rows.append(
            {
                "tasks": n,
                "dim": d,
                "batch": BATCH,
                "build_s": build,
                "fit_s": med(fit),
                "predict_s": med(predict),
                "bots_step_s": med(base),
                "bots_embed_step_s": med(with_evidence),
                "ratio_embed_to_plain_step": med(with_evidence) / med(base),
            }
        )
    return rows


def markdown(meta: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    lines = [
        f"Measured {meta['date']} on {meta['cpu']} ({meta['cores']} cores), SIMD path {meta['simd']}, "
        f"numpy {meta['numpy']}; medians of {meta['repeats']} repeats; batch {BATCH}, {ROLLOUTS} rollouts.",
        "",
        "| tasks | d | estimator built (s) | fit (ms) | predict every task (ms) | BOTS step, no evidence (ms) "
        "| BOTS step with bots-embed (ms) | ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['tasks']:,} | {r['dim']} | {r['build_s']:.2f} | {1e3 * r['fit_s']:.1f} | {1e3 * r['predict_s']:.1f} "
            f"| {1e3 * r['bots_step_s']:.1f} | {1e3 * r['bots_embed_step_s']:.1f} | {r['ratio_embed_to_plain_step']:.1f}× |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=1_000_000)
    p.add_argument("--dims", default="64,256")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=None, help="the BOTS core's threads (default: every core)")
    p.add_argument("--quick", action="store_true", help="N = 20,000, 2 repeats")
    p.add_argument("--out", default=str(HERE / "results"))
    args = p.parse_args(argv)
    n, repeats = (20_000, 2) if args.quick else (args.tasks, args.repeats)
    rows = measure(n, [int(d) for d in args.dims.split(",")], repeats, args.threads)
    meta = {
        "date": dt.date.today().isoformat(),
        "cpu": cpu_model(),
        "cores": core_count(),
        "simd": _core.simd_path(),
        "numpy": np.__version__,
        "python": platform.python_version(),
        "repeats": repeats,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "estimators.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n", encoding="utf-8")
    text = markdown(meta, rows)
    (out / "estimators.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
