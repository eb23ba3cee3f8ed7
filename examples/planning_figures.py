"""Redraw the figures of docs/planning.md from the simulator (a few minutes on one core).

    python examples/planning_figures.py            # all three: plan (+ calibration), lag, guard
    python examples/planning_figures.py guard      # one of them
    python examples/planning_figures.py --smoke    # all three, tiny (seconds), into a fresh temp folder

Writes docs/img/plan19_*.png (``--out`` for another folder); run from the repository root. Peer
methods (knapsack, reinforce-ada) come from bots_rft.selector.peers.
"""

import argparse
import json
import tempfile
import warnings

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from bots_rft.metrics import mean_ci
from bots_rft.report.simulation_plots import plot_calibration
from bots_rft.simulate import LearnerConfig, SimConfig, run_experiment

parser = argparse.ArgumentParser(description="Redraw the figures of docs/planning.md.")
parser.add_argument("which", nargs="*", help="figures to draw: plan, lag, guard (default: all three)")
parser.add_argument("--out", default=None, help="output folder (default: docs/img; with --smoke a fresh temp folder)")
parser.add_argument("--smoke", action="store_true", help="tiny pools, 2 steps, 1 seed: checks the script runs")
args = parser.parse_args()
which = args.which or ["plan", "lag", "guard"]
for name in which:
    if name not in ("plan", "lag", "guard"):
        parser.error(f"which: {name!r} is not a figure (plan, lag, guard)")
OUT = args.out or (tempfile.mkdtemp(prefix="planning_figures_") if args.smoke else "docs/img")
SEEDS = (0,) if args.smoke else (0, 1, 2)
STEPS = 2 if args.smoke else 60
learner = LearnerConfig(num_tasks=400, eval_tasks=64) if args.smoke else LearnerConfig(num_tasks=20000, eval_tasks=1024)
common = dict(
    learner=learner,
    steps=STEPS,
    batch_size=16 if args.smoke else 128,
    seeds=SEEDS,
    rho_sweep=(),
    lam_sweep=(),
    sampling_ablation=False,
)
summary = {}


def band(ax, x, data, label, color, **kw):
    m, h = mean_ci(np.stack(data))
    ax.plot(x, m, label=label, color=color, lw=1.4, **kw)
    ax.fill_between(x, m - h, m + h, color=color, alpha=0.18, lw=0)


if "plan" in which:
    cfg = SimConfig(methods=("random", "bots", "bots-plan", "knapsack", "reinforce-ada"), **common)
    res = run_experiment(cfg, progress=False)
    fig, axes = plt.subplots(1, 3, figsize=(16, 3.8))
    cmap = plt.get_cmap("tab10")
    for i, (label, spec) in enumerate(res.groups["methods"]):
        recs = res.records(spec)
        per = [r.etr * r.hist.sum(1) / r.rollouts for r in recs]
        x = np.arange(1, cfg.steps + 1)
        style = {"ls": "--"} if spec.kind == "random" else {}
        band(axes[0], x, [p * 1000 for p in per], label, cmap(i), **style)
        band(axes[1], x, [r.etr for r in recs], label, cmap(i), **style)
        spent = np.mean([np.concatenate([[0], np.cumsum(r.rollouts)]) for r in recs], axis=0) / (cfg.batch_size * 16)
        band(axes[2], spent, [r.perf - r.perf[0] for r in recs], label, cmap(i), **style)
        summary[label] = {
            "informative_per_1000_rollouts": [
                float(np.sum(r.etr * r.hist.sum(1)) / r.rollouts.sum() * 1000) for r in recs
            ],
            "rollouts_per_step": [float(r.rollouts.mean()) for r in recs],
            "groups_per_step": [float(r.hist.sum(1).mean()) for r in recs],
            "etr": [float(np.nanmean(r.etr)) for r in recs],
            "gain": [float(r.perf[-1] - r.perf[0]) for r in recs],
            "zero_variance": [float(np.nanmean(r.zero_variance)) for r in recs],
            "brier": [float(np.nanmean(r.brier)) for r in recs],
            "ece": [float(np.nanmean(r.ece)) for r in recs],
            "spearman": [float(np.nanmean(r.spearman)) for r in recs],
        }
    axes[0].set_title("informative groups per 1000 rollouts", fontsize=10)
    axes[1].set_title("ETR (share of groups with 0 < k < n)", fontsize=10)
    axes[2].set_title("held-out score gain per rollout spent", fontsize=10)
    axes[0].set_xlabel("step")
    axes[1].set_xlabel("step")
    axes[2].set_xlabel("rollouts spent (÷ batch × n)")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(
        f"Tasks and rollout counts planned together: N={learner.num_tasks:,}, budget {cfg.batch_size}×16 rollouts/step, 3 seeds (mean, 95% CI)",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(f"{OUT}/plan19_plan.png", dpi=90)
    plt.close(fig)
    plot_calibration(res, __import__("pathlib").Path(f"{OUT}/plan19_calibration.png"))
    print(json.dumps(summary))

if "lag" in which:
    lag_summary = {}
    fig, axes = plt.subplots(1, 3, figsize=(16, 3.8))
    cmap = plt.get_cmap("tab10")
    runs = [("lag 0", SimConfig(methods=("bots",), **common), "methods", "BOTS")]
    late = SimConfig(methods=("bots",), lag=4, lag_discount_sweep=(1.0, 0.8, 0.5), **common)
    res0 = run_experiment(runs[0][1], progress=False)
    resl = run_experiment(late, progress=False)
    rows = [("no lag", res0.records(dict(res0.groups["methods"])["BOTS"]))]
    for label, spec in resl.groups["lag"][1:]:
        rows.append((f"lag 4, {label}", resl.records(spec)))
    for i, (label, recs) in enumerate(rows):
        x = np.arange(1, late.steps + 1)
        band(axes[0], x, [r.etr for r in recs], label, cmap(i))
        band(axes[1], x, [r.ece for r in recs], label, cmap(i))
        band(axes[2], np.arange(late.steps + 1), [r.perf - r.perf[0] for r in recs], label, cmap(i))
        lag_summary[label] = {
            "etr": [float(np.nanmean(r.etr)) for r in recs],
            "gain": [float(r.perf[-1] - r.perf[0]) for r in recs],
            "ece": [float(np.nanmean(r.ece)) for r in recs],
        }
    for ax, t in zip(axes, ("ETR", "expected calibration error of the picks", "held-out score gain")):
        ax.set_title(t, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(
        "Late evidence (rollouts reach BOTS 4 steps late) and the lag discount δ: 3 seeds (mean, 95% CI)", fontsize=11
    )
    fig.tight_layout()
    fig.savefig(f"{OUT}/plan19_lag.png", dpi=90)
    plt.close(fig)
    print(json.dumps(lag_summary))

if "guard" in which:
    from bots_rft import BOTS
    from bots_rft.selector.guard import AllZeroGroupWarning, GroupGuard
    from bots_rft.simulate.learner import SimulatedLearner, make_world

    small = (
        LearnerConfig(num_tasks=400, eval_tasks=64) if args.smoke else LearnerConfig(num_tasks=2000, eval_tasks=1024)
    )
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8))
    guard_summary = {}
    for i, (label, share) in enumerate((("BOTS, λ=0", 0.0), ("BOTS, λ=0, + GroupGuard(min_share=0.05)", 0.05))):
        shares, gains, warned_at = [], [], []
        for seed in SEEDS:
            world = make_world(small, seed)
            learner = SimulatedLearner(world, seed)
            broken = world.group == 0  # its verifier never matches: every rollout scores 0
            guard = GroupGuard(
                BOTS(world.num_tasks, lam=0.0, seed=seed, threads=1), world.group, min_share=share, zero_streak=3
            )
            s, first = [], None
            p0 = learner.evaluate()
            g = []
            for t in range(STEPS):
                ids = guard.select(64)
                succ = learner.rollout(ids)
                seen = np.where(broken[ids], 0, succ)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    guard.update(ids, seen, 16)
                if first is None and any(issubclass(w.category, AllZeroGroupWarning) for w in caught):
                    first = t + 1
                learner.train(ids, seen)
                s.append(float(np.mean(broken[ids])))
                g.append(learner.evaluate() - p0)
            shares.append(np.array(s))
            gains.append(np.array(g))
            warned_at.append(first)
        band(axes[0], np.arange(1, STEPS + 1), shares, label, plt.get_cmap("tab10")(i))
        band(axes[1], np.arange(1, STEPS + 1), gains, label, plt.get_cmap("tab10")(i))
        for w in warned_at:
            if w is not None:
                axes[0].axvline(w, color=plt.get_cmap("tab10")(i), ls=":", lw=0.8)
        guard_summary[label] = {
            "warned_at": warned_at,
            "share_last20": [float(x[-20:].mean()) for x in shares],
            "gain": [float(x[-1]) for x in gains],
        }
    axes[0].set_title("share of the batch from the broken group (dotted: the warning)", fontsize=10)
    axes[1].set_title("held-out score gain", fontsize=10)
    for ax in axes:
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(
        "2,000 tasks in 8 groups, batch 64; one group has a verifier that never matches: 3 seeds (mean, 95% CI)",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(f"{OUT}/plan19_guard.png", dpi=90)
    plt.close(fig)
    print(json.dumps(guard_summary))
print("done", which, "->", OUT)
