"""The simulator's prediction for trial 3 (configs/trial3_strings_cpu.yaml), made before its first
run and committed with docs/trial3/probe.md.

The replica is trial 1's (docs/trial/calibration.md: the world fitted to the pool's starting
shares at 0 and 1; the learner's rule, learning rate and trajectory noise fitted to trial 1's real
Random arm, the same pool, policy and schedule as trial 3's Random arm) with two things of trial
3's own, measured before any of its runs:

- the references: the world's weak and strong levels and their per-task noise fitted to trial 3's
  measured reference columns (their mean pass rates, and the strong column's correlation with the
  starting policy's measured pass rates);
- the embeddings: ``embedding_noise``, the simulated embeddings' informativeness, fitted so that
  bots-embed's estimator, fitted on 256 tasks' start pass rates (8 samples each) and scored on
  the rest, predicts the start pass rates at the Pearson correlation the probe measured on the real
  policy's embeddings (docs/trial3/probe.json).

Then Random, bots-embed and BOTS (the paper's defaults) on ``--seeds`` simulation seeds in the one
replica world (one pool, one starting policy, as the trial), paired by seed on the trial's primary
metric, each contrast with its 95% interval, in absolute units and in units of Random's gain.
Writes OUT/prediction.json and OUT/prediction.md.

    python examples/trial3/predict.py --pool runs/trial3/pool/train.parquet --start runs/probe/train.parquet \\
        --probe docs/trial3/probe.json --calibration docs/trial/calibration.json --out docs/trial3
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bots_rft.data import TaskPool
from bots_rft.estimators import EmbeddingRegression
from bots_rft.metrics import pearson
from bots_rft.simulate.learner import LearnerConfig, make_world
from bots_rft.simulate.replica import TRIAL_STRINGS_POOL, calibrated_learner, fit_pool_replica, predict_paired
from bots_rft.simulate.signals import embeddings as simulated_embeddings

WEAK, STRONG = "weak_sft600_pass_rate", "strong_sft1200_pass_rate"


def embedding_pearson(learner: LearnerConfig, k: int, draws: int, seed: int = 0) -> float:
    """What the probe measures, in the replica world: bots-embed's estimator fitted on k tasks'
    start pass rates (measured with the world's n_rollouts) against the others' measured rates."""
    world = make_world(learner, 0)
    rng = np.random.default_rng([seed, 3])
    p = 1.0 / (1.0 + np.exp(-world.base_logit))
    n = learner.n_rollouts
    rate = rng.binomial(n, p) / n
    emb = simulated_embeddings(world, 0)
    out = []
    for _ in range(draws):
        train = np.sort(rng.choice(world.num_tasks, size=k, replace=False))
        test = np.setdiff1d(np.arange(world.num_tasks), train)
        est = EmbeddingRegression(emb, forgetting=0.0)
        w, _ = est.fit_step(train, rate[train] * n, np.full(k, float(n)))
        out.append(pearson(est.predict_weights(w)[test], rate[test]))
    return float(np.mean(out))


def fit_embedding_noise(learner: LearnerConfig, target: float, k: int, draws: int) -> tuple[float, float]:
    """The embedding_noise whose probe Pearson is ``target`` (bisection on a log scale; more noise,
    less correlation), and the Pearson it gives."""
    lo, hi = 1e-3, 100.0
    for _ in range(30):
        mid = math.sqrt(lo * hi)
        got = embedding_pearson(LearnerConfig(**{**learner.to_dict(), "embedding_noise": mid}), k, draws)
        if got > target:
            lo = mid
        else:
            hi = mid
    noise = math.sqrt(lo * hi)
    return noise, embedding_pearson(LearnerConfig(**{**learner.to_dict(), "embedding_noise": noise}), k, draws)


VERDICTS = ("supported", "harmful", "does not matter at this scale", "inconclusive")


def verdict_chances(pred: dict[str, Any], *, draws: int, seeds: int, seed: int = 0) -> dict[str, dict[str, float]]:
    """How often the trial's rule (configs/trial3_strings_cpu.yaml's compare.decision) gives each
    verdict to C4 and C5 when the trial's ``seeds`` seeds are drawn from the simulated ones."""
    from bots_rft.report.trial import Contrast, ContrastRule, decide_contrasts

    rule = ContrastRule(
        (Contrast("bots-embed", "random", "C4"), Contrast("bots", "random", "C5")), alpha=0.05, equivalence=0.0075
    )
    per_seed = {
        m: np.asarray(pred["methods"][m]["per_seed"], dtype=np.float64) for m in ("random", "bots-embed", "bots")
    }
    rng = np.random.default_rng(seed)
    counts: dict[str, dict[str, int]] = {"C4": dict.fromkeys(VERDICTS, 0), "C5": dict.fromkeys(VERDICTS, 0)}
    size = next(iter(per_seed.values())).size
    for _ in range(draws):
        pick = rng.integers(0, size, seeds)
        rows = [
            {"method": m, "seed": i, "step": 0, "rollouts": 0, "avg_at_4": float(v[j]), "greedy": None}
            for m, v in per_seed.items()
            for i, j in enumerate(pick)
        ]
        for result in decide_contrasts(rows, rule).results:
            counts[result.name][result.verdict] += 1
    return {name: {v: c / draws for v, c in got.items()} for name, got in counts.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pool", required=True, help="trial 3's pool with its measured reference columns")
    p.add_argument("--start", required=True, help="the same pool with the start policy's start_pass_rate column")
    p.add_argument("--probe", required=True, help="the probe's probe.json")
    p.add_argument("--calibration", required=True, help="trial 1's calibration.json (learner rule, rate, noise)")
    p.add_argument("--seeds", type=int, default=100)
    p.add_argument("--k", type=int, default=256, help="the probe's labelled tasks the embeddings are fitted at")
    p.add_argument("--smoke", action="store_true", help="a small replica (a check that it runs, not a result)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)

    pool, start = TaskPool.load(args.pool), TaskPool.load(args.start)
    if not np.array_equal(pool.ids, start.ids):
        print("predict: --pool and --start hold other tasks", file=sys.stderr)
        return 2
    weak, strong, rate = pool.pass_rate(WEAK), pool.pass_rate(STRONG), start.pass_rate("start_pass_rate")
    refs = {
        "weak_mean": float(weak.mean()),
        "strong_mean": float(strong.mean()),
        "start_strong_pearson": pearson(rate, strong),
        "start_weak_pearson": pearson(rate, weak),
    }
    probe = json.loads(Path(args.probe).read_text(encoding="utf-8"))
    target = float(probe["result"][str(args.k)]["embedding"]["pearson"])
    cal = json.loads(Path(args.calibration).read_text(encoding="utf-8"))
    best = cal["predictions"][0]  # the rule that explained the dilution runs best, references fitted
    size: dict[str, Any] = dict(steps=20) if args.smoke else dict(steps=100)
    trial = dict(TRIAL_STRINGS_POOL)
    if args.smoke:
        trial.update(num_tasks=600, eval_tasks=100)
    trial.update(
        weak_mean=refs["weak_mean"], strong_mean=refs["strong_mean"], start_strong_pearson=refs["start_strong_pearson"]
    )
    fit = fit_pool_replica(trial, fit_pearson=True, **calibrated_learner(best))
    learner = fit.learner
    noise, got = fit_embedding_noise(learner, target, args.k, 5 if args.smoke else 20)
    learner = LearnerConfig(**{**learner.to_dict(), "embedding_noise": noise})
    seeds = range(3 if args.smoke else args.seeds)
    pred = predict_paired(learner, ("random", "bots-embed", "bots"), seeds=seeds, world_seed=0, **size, batch_size=16)
    verdicts = verdict_chances(pred, draws=2000, seeds=20)
    result = {
        "verdicts_at_20_seeds": verdicts,
        "references": refs,
        "probe_pearson_target": target,
        "embedding_noise": noise,
        "embedding_pearson": got,
        "replica": fit.describe() if hasattr(fit, "describe") else str(fit),
        "learner": learner.to_dict(),
        "prediction": pred,
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "prediction.json").write_text(json.dumps(result, indent=1, default=str) + "\n", encoding="utf-8")
    lines = [
        f"Replica: trial 1's world and learner (rule saturating, learning rate {best['learning_rate']:.4g}, trajectory "
        f"noise {best['trajectory_noise']}), references refitted to trial 3's (weak mean {refs['weak_mean']:.3f}, strong "
        f"mean {refs['strong_mean']:.3f}, strong-start Pearson {refs['start_strong_pearson']:.2f}), embedding noise "
        f"{noise:.3f} (probe Pearson at k = {args.k}: real {target:.2f}, replica {got:.2f}); {len(seeds)} simulation seeds "
        f"in one world, {size['steps']} steps x 16 tasks x 8 rollouts.",
        "",
        "| contrast | predicted mean difference (primary metric) | 95% interval | × Random's gain | seeds |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, name in (("bots-embed", "C4 = bots-embed − random"), ("bots", "C5 = bots − random")):
        m = pred["methods"][label]
        lines.append(
            f"| {name} | {m['diff']:+.4f} | [{m['diff'] - m['diff_half']:+.4f}, {m['diff'] + m['diff_half']:+.4f}] "
            f"| {m['relative']:+.3f} ± {m['relative_half']:.3f} | {m['diff_n']} |"
        )
    lines += [
        "",
        "What the rule would say at the trial's 20 seeds (each of 2,000 draws takes 20 of the simulated seeds with "
        "replacement and applies the pre-registered rule: Holm over C4 and C5 at 0.05, ±0.0075):",
        "",
        "| contrast | supported | harmful | does not matter at this scale | inconclusive |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, chances in verdicts.items():
        lines.append(f"| {name} | " + " | ".join(f"{chances[v]:.0%}" for v in VERDICTS) + " |")
    (out / "prediction.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
