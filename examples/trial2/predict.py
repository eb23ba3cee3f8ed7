"""The simulator's prediction for trial 2 (configs/trial2_strings_cpu.yaml), made before its first
run and committed as docs/trial2/prediction.md and prediction.json.

The replica is trial 1's (docs/trial/calibration.md): a world fitted to trial 1's pool (the starting
policy's shares of tasks at 0 and at 1, the references' mean pass rates and the strong reference's
correlation with the start), the learner's rule, learning rate and trajectory noise fitted to
trial 1's real Random arm. Trial 2 keeps trial 1's policy, references, schedule and held-out set
and trains on 160 of its tasks, so the replica draws 160 training tasks from the same world
(``num_tasks`` = 160), everything else unchanged.

What trial 1 could not fit: how much of a task's signal still transfers when the task is trained on
again (``repeat_decay``; trial 1 saw a task 0.27 times). The calibrated replica has 1.0 (no decay);
a sensitivity row runs the simulator's default, 0.8 (the generalisable share of a task's signal
decays as 0.8 ** times trained). Both are stated; the first is the prediction.

Random, bots, mopps and reference-filter (the paper's defaults) on ``--seeds`` simulation seeds in
one replica world (one pool, one starting policy, as the trial), paired by seed on the trial's
primary metric: C1 = bots − reference-filter, C2 = mopps − random, C3 = bots − random, each with
its 95% interval, in absolute units and in units of Random's gain; each arm's mean training ETR
and gain; and how often the pre-registered rule would give each
verdict at the trial's 20 seeds.

    python examples/trial2/predict.py --calibration docs/trial/calibration.json --out docs/trial2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bots_rft.metrics import mean_ci
from bots_rft.simulate.experiment import MethodSpec, SimConfig, run_method
from bots_rft.simulate.learner import LearnerConfig, make_world
from bots_rft.simulate.replica import TRIAL_STRINGS_POOL, calibrated_learner, fit_pool_replica

ARMS = ("random", "bots", "mopps", "reference-filter")
CONTRASTS = (("C1", "bots", "reference-filter"), ("C2", "mopps", "random"), ("C3", "bots", "random"))
VERDICTS = ("supported", "harmful", "does not matter at this scale", "inconclusive", "not read")
RL_TASKS = 160


def run_arms(learner: LearnerConfig, seeds: range, steps: int, batch_size: int, eval_every: int) -> dict[str, Any]:
    """Every arm on every seed in world 0: per arm and seed, the primary metric (mean held-out
    score at steps 0, eval_every, ..., steps), the gain over step 0 (the mean after step 0 minus
    step 0) and the mean training ETR."""
    sim = SimConfig(learner=learner, steps=steps, batch_size=batch_size, seeds=tuple(seeds), methods=("random",))
    evals = np.arange(0, steps + 1, eval_every)
    out: dict[str, dict[str, list[float]]] = {a: {"primary": [], "gain": [], "etr": []} for a in ARMS}
    world = make_world(learner, 0)
    for seed in seeds:
        for arm in ARMS:
            rec = run_method(MethodSpec(arm), world, seed, sim)
            perf = rec.perf[evals]
            out[arm]["primary"].append(float(perf.mean()))
            out[arm]["gain"].append(float(perf[1:].mean() - perf[0]))
            out[arm]["etr"].append(float(rec.etr.mean()))
    return out


def summarise(runs: dict[str, Any]) -> dict[str, Any]:
    random_gain = float(np.mean(runs["random"]["gain"]))
    arms = {}
    for arm, v in runs.items():
        m, h = (float(x) for x in mean_ci(np.asarray(v["primary"])))
        g, gh = (float(x) for x in mean_ci(np.asarray(v["gain"])))
        arms[arm] = {"primary": m, "primary_half": h, "gain": g, "gain_half": gh, "etr": float(np.mean(v["etr"]))}
    contrasts = {}
    for name, a, b in CONTRASTS:
        d = np.asarray(runs[a]["primary"]) - np.asarray(runs[b]["primary"])
        m, h = (float(x) for x in mean_ci(d))
        contrasts[name] = {
            "method": a,
            "baseline": b,
            "diff": m,
            "diff_half": h,
            "diff_sd": float(np.std(d, ddof=1)),
            "relative": m / random_gain,
            "relative_half": h / random_gain,
            "n": int(d.size),
        }
    return {"random_gain": random_gain, "arms": arms, "contrasts": contrasts}


def verdict_chances(runs: dict[str, Any], *, draws: int, seeds: int, seed: int = 0) -> dict[str, dict[str, float]]:
    """How often the trial's rule (its compare.decision: Holm over C1-C3 at 0.05, ±0.0075, the
    learning check on random and the 0.05 ETR margin) gives each verdict when the trial's ``seeds``
    seeds are drawn from the simulated ones."""
    from bots_rft.report.trial import Contrast, ContrastRule, decide_contrasts

    rule = ContrastRule(
        tuple(Contrast(a, b, name) for name, a, b in CONTRASTS),
        alpha=0.05,
        equivalence=0.0075,
        learning_check="random",
        etr_margin=0.05,
    )
    size = len(runs["random"]["primary"])
    rng = np.random.default_rng(seed)
    counts = {name: dict.fromkeys(VERDICTS, 0) for name, _, _ in CONTRASTS}
    for _ in range(draws):
        pick = rng.integers(0, size, seeds)
        rows = []
        for arm in ARMS:
            for i, j in enumerate(pick):
                primary, gain = runs[arm]["primary"][j], runs[arm]["gain"][j]
                # Two evaluations with the same mean and gain as the run: what the rule reads.
                start = primary - gain / 2.0
                rows.append({"method": arm, "seed": i, "step": 0, "rollouts": 0, "avg_at_4": start, "greedy": None})
                rows.append(
                    {"method": arm, "seed": i, "step": 1, "rollouts": 1, "avg_at_4": start + gain, "greedy": None}
                )
        etr = {arm: float(np.mean([runs[arm]["etr"][j] for j in pick])) for arm in ARMS}
        for result in decide_contrasts(rows, rule, etr=etr).results:
            counts[result.name][result.verdict] += 1
    return {name: {v: c / draws for v, c in got.items()} for name, got in counts.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--calibration", required=True, help="trial 1's calibration.json (learner rule, rate, noise)")
    p.add_argument("--seeds", type=int, default=100)
    p.add_argument("--smoke", action="store_true", help="a small replica (a check that it runs, not a result)")
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    if args.seeds < 2:
        print(f"predict: --seeds: expected an integer >= 2, got {args.seeds}", file=sys.stderr)
        return 2
    path = Path(args.calibration)
    if not path.is_file():
        print(f"predict: --calibration: no file {str(path)!r}", file=sys.stderr)
        return 2
    began = time.perf_counter()
    cal = json.loads(path.read_text(encoding="utf-8"))
    best = cal["predictions"][0]  # the rule that explained the dilution runs best, references fitted
    trial = dict(TRIAL_STRINGS_POOL)
    if args.smoke:
        trial.update(num_tasks=600, eval_tasks=100)
    fit = fit_pool_replica(trial, fit_pearson=True, **calibrated_learner(best))
    steps = 20 if args.smoke else 100
    seeds = range(3 if args.smoke else args.seeds)
    learners = {
        "calibrated (repeat_decay 1.0)": LearnerConfig(**{**fit.learner.to_dict(), "num_tasks": RL_TASKS}),
        "sensitivity (repeat_decay 0.8)": LearnerConfig(
            **{**fit.learner.to_dict(), "num_tasks": RL_TASKS, "repeat_decay": 0.8}
        ),
    }
    results: dict[str, Any] = {}
    for label, learner in learners.items():
        runs = run_arms(learner, seeds, steps, 16, 10 if steps % 10 == 0 else steps)
        results[label] = {
            "summary": summarise(runs),
            "verdicts_at_20_seeds": verdict_chances(runs, draws=400 if args.smoke else 2000, seeds=20),
            "learner": learner.to_dict(),
            "per_seed": runs,
        }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    payload = {
        "replica": fit.describe() if hasattr(fit, "describe") else str(fit),
        "design": {"rl_tasks": RL_TASKS, "steps": steps, "batch_size": 16, "rollouts": 8, "seeds": len(seeds)},
        "results": results,
        "seconds": time.perf_counter() - began,
    }
    (out / "prediction.json").write_text(json.dumps(payload, indent=1, default=str) + "\n", encoding="utf-8")
    lines = [
        f"Replica: trial 1's world and learner (rule saturating, learning rate {best['learning_rate']:.4g}, "
        f"trajectory noise {best['trajectory_noise']}, references fitted to trial 1's: weak mean "
        f"{trial['weak_mean']}, strong mean {trial['strong_mean']}, strong-start Pearson "
        f"{trial['start_strong_pearson']}), {RL_TASKS} training tasks drawn from it; {len(seeds)} simulation seeds "
        f"in one world, {steps} steps × 16 tasks × 8 rollouts, evaluated every 10 steps.",
        "",
    ]
    for label, r in results.items():
        s = r["summary"]
        lines += [
            f"### {label}",
            "",
            f"Random's gain over the run: {s['random_gain']:+.4f}.",
            "",
            "| arm | primary metric | gain over step 0 | mean training ETR |",
            "|---|---:|---:|---:|",
        ]
        for arm, a in s["arms"].items():
            lines.append(
                f"| {arm} | {a['primary']:.4f} ± {a['primary_half']:.4f} | {a['gain']:+.4f} ± {a['gain_half']:.4f} "
                f"| {a['etr']:.3f} |"
            )
        lines += [
            "",
            "| contrast | predicted mean difference | 95% interval | SD over seeds | × Random's gain |",
            "|---|---:|---:|---:|---:|",
        ]
        for name, c in s["contrasts"].items():
            lines.append(
                f"| {name} = {c['method']} − {c['baseline']} | {c['diff']:+.4f} | [{c['diff'] - c['diff_half']:+.4f}, "
                f"{c['diff'] + c['diff_half']:+.4f}] | {c['diff_sd']:.4f} | {c['relative']:+.3f} ± "
                f"{c['relative_half']:.3f} |"
            )
        lines += [
            "",
            "What the rule would say at the trial's 20 seeds (each of the draws takes 20 simulated seeds with "
            "replacement and applies the pre-registered rule, its learning and ETR checks included):",
            "",
            "| contrast | " + " | ".join(VERDICTS) + " |",
            "|---|" + "---:|" * len(VERDICTS),
        ]
        for name, chances in r["verdicts_at_20_seeds"].items():
            lines.append(f"| {name} | " + " | ".join(f"{chances[v]:.0%}" for v in VERDICTS) + " |")
        base = s["arms"]["random"]["etr"]
        gaps = {arm: s["arms"][arm]["etr"] - base for arm in ("bots", "mopps")}
        flagged = [arm for arm, g in gaps.items() if g <= 0.05]
        lines += [
            "",
            "ETR check (mean training ETR over Random's): "
            + ", ".join(f"{arm} {g:+.3f}" for arm, g in gaps.items())
            + (
                f"; predicted at or below the 0.05 margin: {', '.join(flagged)} (its contrasts would be reported as "
                "not having changed what it trained on)."
                if flagged
                else "; both predicted above the 0.05 margin."
            ),
            "",
        ]
    first = results[next(iter(results))]
    likely = {
        name: max(VERDICTS, key=lambda v, c=chances: c[v]) for name, chances in first["verdicts_at_20_seeds"].items()
    }
    c = first["summary"]["contrasts"]
    lines[2:2] = [
        "Prediction (the calibrated replica): "
        + "; ".join(f"{n} {c[n]['method']} − {c[n]['baseline']} {c[n]['diff']:+.4f}" for n in c)
        + ". Most likely verdict under the rule at 20 seeds: "
        + "; ".join(f"{n} {v}" for n, v in likely.items())
        + ".",
        "",
    ]
    if args.smoke:
        lines.insert(0, "(smoke run, not a result)\n")
    (out / "prediction.md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
