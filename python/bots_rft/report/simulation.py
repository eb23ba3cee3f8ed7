"""The tables of a simulated experiment (``bots simulate``): an :class:`ExperimentResult` as the
paper's comparison tables, the implicit-evidence table, the summary and the heatmap data.

TTB and BSF are computed on the seed-averaged held-out curve of each method against the
seed-averaged curve of Random, as the paper does with its 3-seed averages: once against steps,
and once against rollouts spent (the seed-averaged cumulative rollouts before each evaluation).
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from ..metrics import (
    BSF_BUDGETS,
    TTB_FRACTIONS,
    best_so_far,
    rate_heatmap_from_counts,
    rollout_axis,
    time_to_baseline,
)
from ..simulate.experiment import ExperimentResult, MethodSpec
from .tables import Row, markdown_table

__all__ = [
    "GROUP_TITLES",
    "group_rows",
    "evidence_rows",
    "evidence_table",
    "summary_markdown",
    "slug",
    "heatmap_of",
]

GROUP_TITLES = {
    "methods": "Methods",
    "rho": "Impact of ρ",
    "lambda": "Impact of λ",
    "sampling": "Posterior sampling on/off",
    "tau": "Impact of τ (softmax sampling)",
    "target": "Impact of the target p*",
    "adaptive": "Adaptive ρ and λ",
}


def _mean_curve(result: ExperimentResult, spec: MethodSpec, attr: str) -> np.ndarray:
    return np.asarray(np.mean([getattr(r, attr) for r in result.records(spec)], axis=0))


def group_rows(result: ExperimentResult, group: str) -> list[Row]:
    """Rows of one group's table; the first row (Random) is the baseline."""
    rows_spec = result.groups[group]
    base = _mean_curve(result, rows_spec[0][1], "perf")
    steps = np.arange(base.size, dtype=np.float64)
    base_spent = rollout_axis(_mean_curve(result, rows_spec[0][1], "rollouts"))
    per_step = result.config.batch_size * result.config.learner.n_rollouts
    out = []
    for label, spec in rows_spec:
        perf = _mean_curve(result, spec, "perf")
        spent = rollout_axis(_mean_curve(result, spec, "rollouts"))
        out.append(
            Row(
                label=label,
                key=spec.key,
                ttb=time_to_baseline(steps, perf, steps, base, TTB_FRACTIONS),
                bsf=best_so_far(steps, perf, steps, base, BSF_BUDGETS),
                etr=float(_mean_curve(result, spec, "etr").mean()),
                below_one=float(_mean_curve(result, spec, "below_one").mean()),
                above_zero=float(_mean_curve(result, spec, "above_zero").mean()),
                rollouts=float(_mean_curve(result, spec, "rollouts").mean() / per_step),
                final=float(perf[-1]),
                ttb_rollouts=time_to_baseline(spent, perf, base_spent, base, TTB_FRACTIONS),
                bsf_rollouts=best_so_far(spent, perf, base_spent, base, BSF_BUDGETS),
                strict_valid=float(_mean_curve(result, spec, "strict_valid").mean()),
            )
        )
    return out


def evidence_rows(result: ExperimentResult) -> list[dict[str, Any]]:
    """Implicit-evidence quality per trajectory that has an estimator (means over seeds and
    steps, plus early/late windows)."""
    T = result.config.steps
    w = max(1, T // 10)
    out = []
    seen: set[str] = set()
    for rows_spec in result.groups.values():
        for label, spec in rows_spec:
            if spec.key in seen:
                continue
            seen.add(spec.key)
            recs = result.records(spec)
            pn = np.array([r.pearson_next for r in recs])
            if np.all(np.isnan(pn)):
                continue
            auc = np.array([r.auc_next for r in recs])
            pt = np.array([r.pearson_true for r in recs])
            cap = np.array([r.capability for r in recs])

            def m(a: np.ndarray, sl: slice = slice(None)) -> float:
                v = a[:, sl]
                return float(np.nanmean(v)) if np.any(~np.isnan(v)) else math.nan

            out.append(
                {
                    "label": "Random (shadow estimator)" if spec.kind == "random" else label,
                    "key": spec.key,
                    "pearson_next": m(pn),
                    "auc_next": m(auc),
                    "pearson_true": m(pt),
                    "pearson_next_early": m(pn, slice(0, w)),
                    "pearson_next_late": m(pn, slice(T - w - 1, T - 1)),
                    "auc_next_early": m(auc, slice(0, w)),
                    "auc_next_late": m(auc, slice(T - w - 1, T - 1)),
                    "capability_final": m(cap, slice(T - 1, T)),
                }
            )
    return out


def evidence_table(rows: list[dict[str, Any]], steps: int) -> str:
    w = max(1, steps // 10)

    def f(v: float | None) -> str:
        return "n/a" if v is None or math.isnan(v) else f"{v:.2f}"

    lines = [
        f"| Trajectory | Pearson (next batch) | ROC AUC (next batch) | Pearson first/last {w} steps "
        f"| AUC first/last {w} steps | Pearson vs true p (pool) | final μ̃ |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['label']} | {f(r['pearson_next'])} | {f(r['auc_next'])} | "
            f"{f(r['pearson_next_early'])} / {f(r['pearson_next_late'])} | "
            f"{f(r['auc_next_early'])} / {f(r['auc_next_late'])} | {f(r['pearson_true'])} | "
            f"{f(r['capability_final'])} |"
        )
    return "\n".join(lines)


def _group_caption(result: ExperimentResult, group: str) -> str:
    c = result.config
    return {
        "methods": f"BOTS at λ={c.lam:g}, ρ={c.rho:g}, posterior sampling; baselines as in the "
        "paper's appendix E.6; DAPO-DS oversamples ×"
        f"{c.dapo_oversample:g} and keeps tasks with 0 < successes < n.",
        "rho": f"BOTS with λ={c.lam:g}, posterior sampling, ρ varied.",
        "lambda": f"BOTS with ρ={c.rho:g}, posterior sampling, λ varied.",
        "sampling": f"BOTS with λ={c.lam:g}, ρ={c.rho:g}: Thompson sampling vs posterior mean.",
        "tau": f"BOTS with λ={c.lam:g}, ρ={c.rho:g}, p*={c.target:g}: the B tasks nearest p* (τ=0) vs "
        "sampled without replacement from softmax(−|θ − p*| / τ).",
        "target": f"BOTS with λ={c.lam:g}, ρ={c.rho:g}, τ={c.tau:g}, target p* varied.",
        "adaptive": f"BOTS with λ={c.lam:g}, ρ={c.rho:g}: adaptive ρ (halved when predictions miss by "
        "≥ 0.25) and adaptive λ (scaled by the observed drift) on and off.",
    }.get(group, "")


def summary_markdown(result: ExperimentResult, command: str | None = None) -> str:
    c = result.config
    lc = c.learner
    parts = [
        "# bots simulate: task selection on a simulated learner",
        "",
        f"Pool {lc.num_tasks:,} tasks in {lc.num_groups} skill groups, {c.steps} steps, batch "
        f"{c.batch_size}, {lc.n_rollouts} rollouts per task, seeds {list(c.seeds)}, held-out set "
        f"{lc.eval_tasks:,} tasks. Wall time {result.seconds:.1f} s.",
    ]
    if command:
        parts += ["", f"Command: `{command}`"]
    parts += [
        "",
        "TTB (lower is better; '-' = never reached) and BSF (higher is better) are against Random "
        "on the held-out score averaged over seeds, per training step and, in the '(rollouts)' "
        "columns, per rollout spent (a method that rolls out k times more per step needs k times "
        "its step TTB in rollouts); ETR, strict valid (rate in (1/16, 15/16)), <1 and >0 are means "
        "over steps and seeds; Rollouts/step is relative to batch × n. **Best**, _second best_.",
    ]
    for group in result.groups:
        parts += ["", f"## {GROUP_TITLES.get(group, group)}", "", _group_caption(result, group), ""]
        parts.append(markdown_table(group_rows(result, group)))
    ev = evidence_rows(result)
    if ev:
        parts += [
            "",
            "## Implicit-evidence quality",
            "",
            "Interpolation estimator (momentum 0.9): its p̃ after each step against the empirical "
            f"rates of the next step's batch ({lc.n_rollouts} rollouts), and against the "
            "simulator's true success probabilities over the whole pool. AUC ranks tasks by "
            "1 - p̃ⁿ - (1-p̃)ⁿ for effective (0 < rate < 1) vs not. Random's row is the paper's "
            "protocol (uniform batches, estimator fed alongside).",
            "",
            evidence_table(ev, c.steps),
        ]
    return "\n".join(parts) + "\n"


def slug(label: str) -> str:
    """A file-name-safe form of a row label."""
    s = label.replace("ρ", "rho").replace("λ", "lambda").lower()
    return re.sub(r"[^a-z0-9.]+", "-", s).strip("-")


def heatmap_of(result: ExperimentResult, spec: MethodSpec) -> np.ndarray:
    """``[steps, n+1]`` share of selected tasks per empirical-rate bin, averaged over seeds."""
    n = result.config.learner.n_rollouts
    rows = [rate_heatmap_from_counts(r.hist) for r in result.records(spec)]
    return np.mean(rows, axis=0) if rows else np.zeros((0, n + 1))
