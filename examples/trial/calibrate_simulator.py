"""The simulated learner checked against the real trainer, then calibrated to it.

1. **Which step rule.** The dilution test's arms (Random at batch 8; batch 16 with 8 zero-variance
   fillers; batch 16 with 8 tasks the start policy solved 8/8, which still gave signal) are read
   from their logs; each run's per-step signal predicts its held-out gain under each candidate
   rule (``bots_rft.report.step_rule``), and the rules are ranked by how well they explain the
   runs' gains.
2. **A replica of the trial.** The simulated world is fitted to the trial's pool (its start
   policy's shares at 0 and 1, the references' mean pass rates); the learning rate so that Random's
   gain over the run, relative to its start, equals the real Random arm's; the trajectory noise
   so that Random's seed-to-seed spread over its gain equals the real arm's.
3. **The prediction.** BOTS − Random on the primary metric (mean held-out accuracy over the run,
   paired by seed) in units of Random's own gain, simulated, beside the real trial's paired
   interval in the same units; under the best rule and under the old linear rule.
4. **The scoreboard's learner.** Under the best rule, on the scoreboard's paper-54k regime: the
   learning rate that keeps Random's gain over the run what the old learner gives (the world's
   calibration to the paper's Random curve), and the trajectory noise that gives Random the real
   arm's seed spread over its gain. These go into ``bots_rft/simulate/fitted.py``.

Writes OUT/calibration.md and OUT/calibration.json::

    python examples/trial/calibrate_simulator.py --trial runs/trial --dilution runs/dilution --out docs/trial

``--smoke`` runs the same pipeline on a small replica (a check that it works, not a result).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bots_rft.metrics import mean_ci
from bots_rft.report.step_rule import Candidate, fit_markdown, fit_step_rule, run_signal
from bots_rft.report.training import RunCurves, load_run
from bots_rft.simulate.fitted import NO_SATURATION_K
from bots_rft.simulate.replica import (
    CALIBRATION_LEARNER,
    TRIAL_STRINGS_POOL,
    fit_learning_rate,
    fit_pool_replica,
    fit_trajectory_noise,
    predict_paired,
)

DILUTION_ARMS = ("batch8", "batch16_filled", "batch16_onefill")


def finished_runs(root: Path, arm: str) -> dict[int, RunCurves]:
    """The runs of ``root/arm/seed*`` whose last evaluation is at their last step."""
    out = {}
    for d in sorted((root / arm).glob("seed*")):
        if not (d / "metrics.jsonl").exists():
            continue
        run = load_run(arm, d)
        steps = int(run.config.get("steps", 0))
        if run.evals and run.evals[-1]["step"] == steps and len(run.train) == steps:
            out[int(d.name.removeprefix("seed"))] = run
    return out


def _primary(run: RunCurves) -> float:
    return float(run.eval_acc.mean())


def real_arms(trial: Path) -> dict[str, Any]:
    """The real trial's Random arm (start, relative gain, seed spread) and BOTS − Random paired
    on the primary metric, over the seeds both arms finished."""
    random, bots = finished_runs(trial, "random"), finished_runs(trial, "bots")
    if len(random) < 2:
        raise SystemExit(f"calibrate_simulator: --trial: fewer than 2 finished random runs in {str(trial)!r}")
    starts = np.asarray([r.eval_acc[0] for r in random.values()])
    prim = np.asarray([_primary(r) for r in random.values()])
    gain = float(prim.mean() - starts.mean())
    paired = sorted(set(random) & set(bots))
    diffs = np.asarray([_primary(bots[s]) - _primary(random[s]) for s in paired])
    mean, half = (float(v) for v in mean_ci(diffs)) if diffs.size > 1 else (float("nan"), float("nan"))
    return {
        "random_seeds": sorted(random),
        "paired_seeds": paired,
        "start": float(starts.mean()),
        "gain": gain,
        "relative_gain": gain / float(starts.mean()),
        "sd_ratio": float(prim.std(ddof=1)) / gain,
        "diff": mean,
        "diff_half": half,
        "relative": mean / gain,
        "relative_half": half / gain,
    }


def replica_prediction(rule: Candidate, real: dict[str, Any], smoke: bool, fit_pearson: bool = True) -> dict[str, Any]:
    """The trial's replica under ``rule``: learning rate and trajectory noise fitted to the real
    Random arm, then BOTS − Random predicted. ``fit_pearson``: the references' per-task noise is
    fitted too, so that the strong reference correlates with the start policy as the real one
    does (otherwise the learner's default noise, which makes the references more informative
    than the trial's)."""
    size = dict(seeds=range(3), steps=20) if smoke else dict(seeds=range(20), steps=100)
    pool = dict(TRIAL_STRINGS_POOL)
    if smoke:
        pool.update(num_tasks=600, eval_tasks=100)
    overrides: dict[str, Any] = {**CALIBRATION_LEARNER, "step_rule": rule.rule}
    if rule.rule == "saturating":
        overrides["saturation_k"] = NO_SATURATION_K if math.isinf(rule.k) else rule.k
    fit = fit_pool_replica(pool, fit_pearson=fit_pearson, **overrides)
    learner = fit.learner  # the search starts at the rule's default step size
    lr, _ = fit_learning_rate(learner, real["relative_gain"], world_seed=0, **size)
    learner = type(learner)(**{**learner.to_dict(), "learning_rate": lr})
    sigma, noise_table = fit_trajectory_noise(learner, real["sd_ratio"], world_seed=0, **size)
    learner = type(learner)(**{**learner.to_dict(), "trajectory_noise": sigma})
    pred = predict_paired(learner, ("random", "bots"), world_seed=0, **size)
    b = pred["methods"]["bots"]
    return {
        "rule": rule.name,
        "references": "fitted to the real correlation" if fit_pearson else "default noise (not fitted)",
        "ref_task_noise": learner.ref_task_noise,
        "learning_rate": lr,
        "trajectory_noise": sigma,
        "noise_table": noise_table,
        "replica": fit.describe(),
        "random_gain": pred["baseline_gain"],
        "diff": b["diff"],
        "diff_half": b["diff_half"],
        "relative": b["relative"],
        "relative_half": b["relative_half"],
    }


def scoreboard_learner(rule: Candidate, real: dict[str, Any], smoke: bool) -> dict[str, Any]:
    """The paper-54k regime's learner under ``rule``, its learning rate and trajectory noise
    fitted (module docstring, step 4)."""
    from dataclasses import replace

    from bots_rft.simulate.learner import LearnerConfig

    # The scoreboard's old learner: the linear rule at its step size, no trajectory noise.
    base = LearnerConfig(group_noise=4.0, repeat_decay=1.0, step_rule="linear", trajectory_noise=0.0)
    size: dict[str, Any] = (
        dict(seeds=range(2), steps=10, batch_size=64) if smoke else dict(seeds=range(6), steps=100, batch_size=256)
    )
    if smoke:
        base = replace(base, num_tasks=2000, eval_tasks=200)
    old = predict_paired(base, ("random",), world_seed=0, **size)
    target = old["baseline_gain"] / old["start"]
    learner = replace(base, step_rule=rule.rule)
    if rule.rule == "saturating":
        k = NO_SATURATION_K if math.isinf(rule.k) else rule.k
        # Start near the rate that gives a batch of mean signal 0.3 the old step: 0.06 * 0.3 B / (0.3 B + K) -> 0.06.
        signal = 0.3 * size["batch_size"]
        learner = replace(
            learner,
            saturation_k=k,
            learning_rate=base.step_size * (signal / size["batch_size"]) * (signal + k) / signal,
        )
    lr, _ = fit_learning_rate(learner, target, world_seed=0, **size)
    learner = replace(learner, learning_rate=lr)
    sigma, table = fit_trajectory_noise(learner, real["sd_ratio"], world_seed=0, **size)
    return {
        "rule": rule.name,
        "step_rule": learner.step_rule,
        "saturation_k": learner.saturation_k,
        "learning_rate": lr,
        "trajectory_noise": sigma,
        "random_relative_gain": target,
        "noise_table": table,
    }


def _interval(mean: float, half: float) -> str:
    return f"{mean:+.3f} [{mean - half:+.3f}, {mean + half:+.3f}]"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trial", required=True, help="the trial's bots compare output directory")
    p.add_argument("--dilution", required=True, help="the dilution test's directory (batch8/, batch16_filled/ ...)")
    p.add_argument("--out", required=True, help="where calibration.md and calibration.json go")
    p.add_argument("--smoke", action="store_true", help="a small replica: checks the pipeline, no result")
    p.add_argument(
        "--trial-seeds", type=int, default=20, help="the seeds the trial's rule decides on (fewer paired: interim)"
    )
    args = p.parse_args(argv)
    trial, dilution, out = Path(args.trial), Path(args.dilution), Path(args.out)
    for flag, path in (("--trial", trial), ("--dilution", dilution)):
        if not path.is_dir():
            print(f"calibrate_simulator: {flag}: no directory {str(path)!r}", file=sys.stderr)
            return 2

    arms = {}
    for arm in DILUTION_ARMS:
        runs = finished_runs(dilution, arm)
        if runs:
            arms[arm] = [run_signal(arm, runs[s]) for s in sorted(runs)]
    if "batch8" not in arms or len(arms) < 2:
        print(
            f"calibrate_simulator: --dilution: needs finished batch8 runs and another arm in {str(dilution)!r}",
            file=sys.stderr,
        )
        return 2
    fits = fit_step_rule(arms, "batch8")
    real = real_arms(trial)
    best = fits[0].candidate
    rules = [best] + ([Candidate("linear")] if best.rule != "linear" else [])
    # The calibrated replica (references fitted too) under each rule, then the best rule with the
    # learner's default reference noise, as a sensitivity row: how much of the prediction the
    # references' informativeness carries.
    predictions = [replica_prediction(rule, real, args.smoke) for rule in rules]
    predictions.append(replica_prediction(best, real, args.smoke, fit_pearson=False))

    lines = [
        "# The simulated learner against the real trainer" + (" (smoke run, not a result)" if args.smoke else ""),
        "",
        "## Which step rule the real runs follow",
        "",
        f"Dilution-test runs: {', '.join(f'{a} {len(r)}' for a, r in arms.items())}. Each rule predicts each run's "
        "held-out gain over the run (mean over the evaluations after the start, minus the start) from the run's "
        "own per-step signals, up to one fitted scale; rules are ranked by the residual.",
        "",
        fit_markdown(arms, "batch8", fits),
        "",
        "## The trial's replica, and what it predicts",
        "",
        f"Real Random arm: {len(real['random_seeds'])} finished seeds, start {real['start']:.3f}, gain over the run "
        f"{real['gain']:+.4f} ({real['relative_gain']:.3f} of the start), seed SD of the primary metric / gain "
        f"{real['sd_ratio']:.3f}. Real BOTS − Random on the primary metric over {len(real['paired_seeds'])} paired "
        f"seeds: {_interval(real['diff'], real['diff_half'])}, in units of Random's gain "
        f"{_interval(real['relative'], real['relative_half'])}."
        + (
            f" These are interim values ({len(real['paired_seeds'])} of the trial's {args.trial_seeds} seeds), "
            "not the trial's outcome, which its rule gives on all of them."
            if len(real["paired_seeds"]) < args.trial_seeds
            else ""
        ),
        "",
        "| Learner | references | learning rate | trajectory noise | simulated BOTS − Random (× Random's gain) "
        "| real (× Random's gain) | inside the real interval |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for pr in predictions:
        inside = abs(pr["relative"] - real["relative"]) <= real["relative_half"]
        lines.append(
            f"| {pr['rule']} | {pr['references']} (noise {pr['ref_task_noise']:.2f}) | {pr['learning_rate']:.4g} "
            f"| {pr['trajectory_noise']:g} "
            f"| {_interval(pr['relative'], pr['relative_half'])} | {_interval(real['relative'], real['relative_half'])} "
            f"| {'yes' if inside else 'no'} |"
        )
    board = scoreboard_learner(best, real, args.smoke)
    lines += [
        "",
        f"Replica world: {predictions[0]['replica']}",
        "",
        f"Without the reference fit: {predictions[-1]['replica']}",
        "",
        "## The scoreboard's learner",
        "",
        f"Under {board['rule']}, on the paper-54k regime: learning rate {board['learning_rate']:.4g} (Random's gain "
        f"over the run {board['random_relative_gain']:.3f} of its start, as with the old learner), trajectory noise "
        f"{board['trajectory_noise']:g} (Random's seed SD / gain as the real arm's, {real['sd_ratio']:.3f}).",
        "",
    ]
    out.mkdir(parents=True, exist_ok=True)
    (out / "calibration.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    record = {
        "smoke": args.smoke,
        "dilution": {a: len(r) for a, r in arms.items()},
        "fits": [{"rule": f.candidate.name, "scale": f.scale, "rss": f.rss, "arm_ratio": f.arm_ratio} for f in fits],
        "real": real,
        "predictions": [{k: v for k, v in pr.items() if k != "noise_table"} for pr in predictions],
        "scoreboard_learner": {k: v for k, v in board.items() if k != "noise_table"},
    }
    (out / "calibration.json").write_text(json.dumps(record, indent=1, default=str) + "\n", encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
