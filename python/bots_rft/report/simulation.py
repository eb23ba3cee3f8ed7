"""The tables of a simulated experiment (``bots simulate``): an :class:`ExperimentResult` as the
paper's comparison tables, the implicit-evidence table, the summary and the heatmap data.

TTB and BSF are computed on the seed-averaged held-out curve of each method against the
seed-averaged curve of Random, as the paper does with its 3-seed averages: once against steps,
and once against rollouts spent (the seed-averaged cumulative rollouts before each evaluation).
:func:`interval_rows` / :func:`interval_table` compute them seed by seed instead (each seed
against its own Random), for the methods table with 95% intervals over seeds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError, InvalidArgumentError
from ..metrics import (
    BSF_BUDGETS,
    TTB_FRACTIONS,
    best_so_far,
    mean_ci,
    rate_heatmap_from_counts,
    rollout_axis,
    time_to_baseline,
)
from ..simulate.experiment import ExperimentResult, MethodSpec, SimConfig, run_experiment
from ..simulate.learner import LearnerConfig
from .tables import Row, markdown_table

__all__ = [
    "GROUP_TITLES",
    "group_rows",
    "SeedInterval",
    "interval_rows",
    "interval_table",
    "evidence_rows",
    "evidence_table",
    "summary_markdown",
    "slug",
    "heatmap_of",
    "quick_comparison",
]

GROUP_TITLES = {
    "methods": "Methods",
    "rho": "Impact of ρ",
    "lambda": "Impact of λ",
    "sampling": "Posterior sampling on/off",
    "tau": "Impact of τ (softmax sampling)",
    "target": "Impact of the target p*",
    "adaptive": "Adaptive ρ and λ",
    "lag": "Late evidence: the lag discount δ",
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


@dataclass
class SeedInterval:
    """One method's TTB/BSF against Random computed seed by seed (each seed's curve against that
    seed's Random, on the same world), summarised as mean and 95% interval over the seeds.

    ``values[name]`` holds one entry per seed for ``name`` in ``ttb_<f>``, ``bsf_<b>`` (per
    training step) and ``ttb_rollouts_<f>``, ``bsf_rollouts_<b>`` (per rollout spent), plus
    ``final`` (held-out score after the last step) and ``rollouts_per_step`` (÷ batch × n). A TTB
    of None (never reached) stays None; NaN (undefined) stays NaN."""

    label: str
    key: str
    values: dict[str, list[float | None]]

    def cell(self, name: str, digits: int = 2) -> str:
        """``mean ± half-width`` over the seeds where it is defined; ``(k/S)`` when only k of the S
        seeds reached it; ``-`` when none did; ``n/a`` when undefined."""
        vals = self.values[name]
        reached = [v for v in vals if v is not None and not math.isnan(v)]
        if not reached:
            return "-" if any(v is None for v in vals) else "n/a"
        mean, half = mean_ci(np.asarray(reached))
        text = (
            f"{float(mean):.{digits}f} ± {float(half):.{digits}f}" if len(reached) > 1 else f"{reached[0]:.{digits}f}"
        )
        missed = sum(v is None for v in vals)
        return f"{text} ({len(reached)}/{len(vals)})" if missed else text

    def mean(self, name: str) -> float:
        reached = [v for v in self.values[name] if v is not None and not math.isnan(v)]
        return float(np.mean(reached)) if reached else math.nan


def _appender(values: dict[str, list[float | None]]) -> Any:
    """``put(prefix, levels, ratios)``: append each ratio to ``values[f"{prefix}_{level%}"]``."""

    def put(prefix: str, levels: tuple[float, ...], ratios: list[float | None]) -> None:
        for level, v in zip(levels, ratios):
            values.setdefault(f"{prefix}_{int(level * 100)}", []).append(v)

    return put


def interval_rows(result: ExperimentResult, group: str = "methods") -> list[SeedInterval]:
    """Per-seed TTB and BSF of each row of ``group`` against the group's first row (Random), per
    step and per rollout spent, with the final score and rollouts per step (see :class:`SeedInterval`)."""
    rows_spec = result.groups[group]
    base_spec = rows_spec[0][1]
    unit = result.config.batch_size * result.config.learner.n_rollouts
    out = []
    for label, spec in rows_spec:
        values: dict[str, list[float | None]] = {}
        put = _appender(values)

        for seed in result.config.seeds:
            rec, base = result.runs[(spec.key, seed)], result.runs[(base_spec.key, seed)]
            steps = np.arange(rec.perf.size, dtype=np.float64)
            base_steps = np.arange(base.perf.size, dtype=np.float64)
            spent, base_spent = rollout_axis(rec.rollouts), rollout_axis(base.rollouts)
            put("ttb", TTB_FRACTIONS, time_to_baseline(steps, rec.perf, base_steps, base.perf, TTB_FRACTIONS))
            put("bsf", BSF_BUDGETS, best_so_far(steps, rec.perf, base_steps, base.perf, BSF_BUDGETS))
            put("ttb_rollouts", TTB_FRACTIONS, time_to_baseline(spent, rec.perf, base_spent, base.perf, TTB_FRACTIONS))
            put("bsf_rollouts", BSF_BUDGETS, best_so_far(spent, rec.perf, base_spent, base.perf, BSF_BUDGETS))
            values.setdefault("final", []).append(float(rec.perf[-1]))
            # Paired with Random on the same world, so the worlds' different scores cancel.
            values.setdefault("final_vs_random", []).append(float(rec.perf[-1] - base.perf[-1]))
            values.setdefault("rollouts_per_step", []).append(float(rec.rollouts.mean() / unit))
            values.setdefault("etr", []).append(float(np.nanmean(rec.etr)))
        out.append(SeedInterval(label, spec.key, values))
    return out


def interval_table(rows: list[SeedInterval], per: str = "step") -> str:
    """The headline table with 95% intervals over seeds: TTB 50/75/100% and BSF 25/50/100% against
    Random, ``per`` training step (with ETR and the final score's difference from Random's) or
    ``per`` rollout spent (with the rollouts spent per step, ÷ batch × n). **Bold**: the best mean
    of a column."""
    if per not in ("step", "rollout"):
        raise InvalidArgumentError(f"per: must be 'step' or 'rollout', got {per!r}", "per")
    prefix = "" if per == "step" else "_rollouts"
    cols: list[tuple[str, str, bool | None, int]] = [
        *((f"TTB {int(f * 100)}% ↓", f"ttb{prefix}_{int(f * 100)}", True, 2) for f in TTB_FRACTIONS),
        *((f"BSF {int(b * 100)}% ↑", f"bsf{prefix}_{int(b * 100)}", False, 3) for b in BSF_BUDGETS),
    ]
    if per == "step":
        cols += [("ETR ↑", "etr", False, 3), ("Final − Random ↑", "final_vs_random", False, 4)]
    else:
        cols += [("Rollouts/step", "rollouts_per_step", None, 2)]
    lines = [
        "| Method | " + " | ".join(c[0] for c in cols) + " |",
        "|---|" + "---:|" * len(cols),
    ]
    best: dict[str, float] = {}
    for _, name, lower, _ in cols:
        means = [r.mean(name) for r in rows if not math.isnan(r.mean(name))]
        if lower is not None and means:
            best[name] = min(means) if lower else max(means)
    for r in rows:
        cells = []
        for _, name, _, digits in cols:
            text = r.cell(name, digits)
            m = r.mean(name)
            bold = name in best and not math.isnan(m) and round(m, digits) == round(best[name], digits)
            cells.append(f"**{text}**" if bold and text not in ("-", "n/a") else text)
        lines.append(f"| {r.label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


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
    if "methods" in result.groups and len(c.seeds) > 1:
        rows = interval_rows(result, "methods")
        parts += [
            "",
            "## Methods with 95% intervals over seeds",
            "",
            "Each seed's curve against that seed's Random (the same world), then mean ± the 95% "
            "Student-t half-width over seeds; `(k/S)`: only k of the S seeds reached the target. "
            "Per training step:",
            "",
            interval_table(rows, "step"),
            "",
            "Per rollout spent (every rollout a method generates: screening, filtered groups, refills):",
            "",
            interval_table(rows, "rollout"),
        ]
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


def quick_comparison(num_tasks: int = 10_000, steps: int = 40, seed: int = 0, progress: bool = False) -> str:
    """Every method once on a small simulated pool (one seed, no sweeps; a few seconds) and
    return the comparison as a short markdown table with a one-line caption."""
    for name, v, lo in (("num_tasks", num_tasks, 64), ("steps", steps, 4), ("seed", seed, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ConfigError(f"{name} must be an int >= {lo}, got {v!r}")
    batch = max(8, min(256, num_tasks // 40))
    config = SimConfig(
        learner=LearnerConfig(num_tasks=num_tasks, eval_tasks=2048),
        steps=steps,
        batch_size=batch,
        seeds=(seed,),
        rho_sweep=(),
        lam_sweep=(),
        sampling_ablation=False,
    )
    result = run_experiment(config, progress=progress, desc="quick comparison")
    caption = (
        f"Simulated learner, {num_tasks:,} tasks, {steps} steps, batch {batch}, "
        f"{config.learner.n_rollouts} rollouts, seed {seed} (full version: `bots simulate`)."
    )
    return caption + "\n\n" + markdown_table(group_rows(result, "methods")) + "\n"
