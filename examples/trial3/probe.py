"""How much of a policy's pass rates its own prompt embeddings predict, offline: the probe made
before trial 3 (docs/trial3/probe.md).

Given a pool with the starting policy's measured pass rates (``bots refeval ... --column
start_pass_rate``) and that policy's prompt embeddings (``bots embed``), each predictor is fitted
on k tasks drawn at random with their measured successes and scored on every other task, for
several k, ``--draws`` draws each:

- ``embedding``: bots-embed's estimator itself (:class:`bots_rft.estimators.EmbeddingRegression`,
  its default prior), fitted in one update on the k tasks' successes out of ``--rollouts``;
- ``prompt length``: the same estimator on one feature, the prompt's length in characters;
- every reference column named with ``--reference`` (a static column: nothing is fitted; the
  same held-out tasks are scored).

Scores: Pearson correlation of the prediction with the measured pass rate, and the ROC AUC of
P(0 < successes < n | p̃) for the effective tasks (0 < pass rate < 1), the measure the trials
report for implicit evidence. Writes probe.json and probe_table.md to ``--out``.

    python examples/trial3/probe.py --pool runs/probe/train.parquet --embeddings runs/probe/start.safetensors \\
        --out docs/trial3
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bots_rft.data import TaskPool
from bots_rft.data.embeddings import embeddings_for
from bots_rft.errors import BotsError
from bots_rft.estimators import EmbeddingRegression
from bots_rft.metrics.paper import effective_probability, pearson, roc_auc


def _scores(pred: np.ndarray, rate: np.ndarray, n: int) -> tuple[float, float]:
    effective = (rate > 0) & (rate < 1)
    return pearson(pred, rate), roc_auc(effective_probability(pred, n), effective)


def _fitted(features: np.ndarray, train: np.ndarray, rate: np.ndarray, n: int) -> np.ndarray:
    est = EmbeddingRegression(features, forgetting=0.0)
    weights, _ = est.fit_step(np.sort(train), rate[np.sort(train)] * n, np.full(train.size, float(n)))
    return est.predict_weights(weights)


def probe(
    pool: TaskPool,
    embeddings: np.ndarray,
    rate: np.ndarray,
    references: dict[str, np.ndarray],
    ks: list[int],
    draws: int,
    n: int,
    seed: int,
) -> dict[str, Any]:
    lengths = np.array([[float(len(chat[-1]["content"]))] for chat in pool.prompts()])
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    for k in ks:
        rows: dict[str, list[tuple[float, float]]] = {"embedding": [], "prompt length": []}
        rows.update({name: [] for name in references})
        for _ in range(draws):
            train = rng.choice(len(rate), size=k, replace=False)
            test = np.setdiff1d(np.arange(len(rate)), train)
            rows["embedding"].append(_scores(_fitted(embeddings, train, rate, n)[test], rate[test], n))
            rows["prompt length"].append(_scores(_fitted(lengths, train, rate, n)[test], rate[test], n))
            for name, column in references.items():
                rows[name].append(_scores(column[test], rate[test], n))
        out[str(k)] = {
            name: {
                "pearson": float(np.mean([r[0] for r in vals])),
                "pearson_sd": float(np.std([r[0] for r in vals], ddof=1)),
                "auc": float(np.mean([r[1] for r in vals])),
                "auc_sd": float(np.std([r[1] for r in vals], ddof=1)),
            }
            for name, vals in rows.items()
        }
    return out


def markdown(result: dict[str, Any], meta: dict[str, Any]) -> str:
    ks = list(result)
    names = list(result[ks[0]])
    lines = [
        f"Pool: {meta['tasks']} tasks, measured pass rate mean {meta['mean_rate']:.3f} "
        f"({meta['share_zero']:.1%} at 0, {meta['share_one']:.1%} at 1); embeddings of dimension {meta['dim']}; "
        f"{meta['draws']} draws per k.",
        "",
        "| predictor | "
        + " | ".join(f"Pearson, k = {k}" for k in ks)
        + " | "
        + " | ".join(f"AUC, k = {k}" for k in ks)
        + " |",
        "|---|" + "---:|" * (2 * len(ks)),
    ]
    for name in names:
        p = [f"{result[k][name]['pearson']:.2f} ± {result[k][name]['pearson_sd']:.2f}" for k in ks]
        a = [f"{result[k][name]['auc']:.2f} ± {result[k][name]['auc_sd']:.2f}" for k in ks]
        lines.append(f"| {name} | " + " | ".join(p) + " | " + " | ".join(a) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pool", required=True, help="a pool with the policy's measured pass rates")
    p.add_argument("--embeddings", required=True, help="the policy's prompt embeddings (bots embed)")
    p.add_argument("--column", default="start_pass_rate", help="the measured pass rates (default: %(default)s)")
    p.add_argument("--reference", action="append", default=[], help="a reference pass-rate column to score too")
    p.add_argument("--ks", default="16,64,256,1024", help="labelled tasks per fit (default: %(default)s)")
    p.add_argument("--draws", type=int, default=20, help="draws per k (default: %(default)s)")
    p.add_argument("--rollouts", type=int, default=8, help="samples behind each pass rate (default: %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True, help="directory for probe.json and probe_table.md")
    args = p.parse_args(argv)
    try:
        pool = TaskPool.load(args.pool)
        rate = pool.pass_rate(args.column)
        refs = {name: pool.pass_rate(name) for name in args.reference}
        emb = embeddings_for(args.embeddings, pool.ids, argument="--embeddings")
        ks = [int(k) for k in args.ks.split(",")]
    except (BotsError, ValueError) as exc:
        print(f"probe: {exc}", file=sys.stderr)
        return 2
    result = probe(pool, emb, rate, refs, ks, args.draws, args.rollouts, args.seed)
    meta = {
        "tasks": len(pool),
        "mean_rate": float(rate.mean()),
        "share_zero": float((rate == 0).mean()),
        "share_one": float((rate == 1).mean()),
        "dim": int(emb.shape[1]),
        "draws": args.draws,
        "rollouts": args.rollouts,
        "seed": args.seed,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "probe.json").write_text(json.dumps({"meta": meta, "result": result}, indent=1) + "\n", encoding="utf-8")
    text = markdown(result, meta)
    (out / "probe_table.md").write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
