"""Tables and curves of several training runs on the same pool, seed and budget (``bots
compare``): the paper's TTB/BSF against Random on the held-out accuracy curve, per step and per
rollout spent, ETR, the strict valid ratio and the <1/>0 ratios, rollouts spent per step, final
accuracy, step-time medians, and PNG curves. With several
seeds per method the tables use the mean curves, a seed table gives 95% intervals, and the plot
shows mean curves with 95% bands."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..metrics import (
    BSF_BUDGETS,
    TTB_FRACTIONS,
    best_so_far,
    effective_probability,
    mean_ci,
    pearson,
    roc_auc,
    time_to_baseline,
)
from ..metrics.paper import _T975
from ..train.logger import read_metrics
from .tables import Row, markdown_table

__all__ = [
    "RunCurves",
    "load_run",
    "average_runs",
    "comparison_rows",
    "comparison_markdown",
    "timing_markdown",
    "seeds_markdown",
    "budget_markdown",
    "best_within",
    "distinct_tasks",
    "evidence_quality",
    "shadow_evidence_quality",
    "regression_evidence_quality",
    "regression_evidence_markdown",
    "evidence_markdown",
    "plot_runs",
    "paired_markdown",
    "plot_held_out",
]


class RunCurves:
    """One run's per-step training records and its evaluation curve."""

    def __init__(self, label: str, records: list[dict[str, Any]]) -> None:
        self.label = label
        self.train = [r for r in records if r.get("kind") == "train"]
        self.evals = [r for r in records if r.get("kind") == "eval"]
        cfg: dict[str, Any] = next((r["config"] for r in records if r.get("kind") == "config"), {})
        self.config: dict[str, Any] = cfg
        self.per_step = int(cfg.get("batch_size", 1)) * int(cfg.get("rollouts", 1))

    def col(self, key: str) -> np.ndarray:
        return np.asarray([np.nan if r.get(key) is None else r[key] for r in self.train], dtype=np.float64)

    @property
    def eval_steps(self) -> np.ndarray:
        return np.asarray([r["step"] for r in self.evals], dtype=np.float64)

    @property
    def eval_acc(self) -> np.ndarray:
        return np.asarray([r["accuracy"] for r in self.evals], dtype=np.float64)

    @property
    def eval_rollouts(self) -> np.ndarray:
        """Rollouts spent before each evaluation: the eval records' ``cum_rollouts`` or, in logs
        without it, the train records' rollouts summed up to the evaluation's step."""
        if all(r.get("cum_rollouts") is not None for r in self.evals):
            return np.asarray([r["cum_rollouts"] for r in self.evals], dtype=np.float64)
        steps, spent = self.col("step"), np.nan_to_num(self.col("rollouts"))
        return np.asarray([spent[steps <= s].sum() for s in self.eval_steps], dtype=np.float64)

    @property
    def eval_seconds(self) -> np.ndarray:
        """Training wall-clock before each evaluation: the steps' ``step_s`` summed up to the
        evaluation's step (evaluations themselves excluded: every method pays the same for them)."""
        steps, took = self.col("step"), np.nan_to_num(self.col("step_s"))
        return np.asarray([took[steps <= s].sum() for s in self.eval_steps], dtype=np.float64)


def load_run(label: str, run_dir: str | Path) -> RunCurves:
    return RunCurves(label, read_metrics(Path(run_dir) / "metrics.jsonl"))


def _mean_records(groups: list[list[dict[str, Any]]], kind: str) -> list[dict[str, Any]]:
    """Record i of the result: the mean over runs of every numeric field of their record i
    (runs of one budget log the same steps; a longer run's extra records are dropped)."""
    out = []
    for recs in zip(*groups):
        keys = [k for k, v in recs[0].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        row: dict[str, Any] = {"kind": kind}
        for k in keys:
            vals = [r.get(k) for r in recs]
            finite = [float(v) for v in vals if isinstance(v, (int, float)) and v == v]
            row[k] = float(np.mean(finite)) if finite else None
        out.append(row)
    return out


def average_runs(label: str, runs: list[RunCurves]) -> RunCurves:
    """One method's runs over several seeds as a single run of per-step means (what the TTB/BSF
    table is computed on); a single run is returned unchanged."""
    if len(runs) == 1:
        return runs[0]
    config = {"kind": "config", "config": runs[0].config}
    records = (
        [config] + _mean_records([r.train for r in runs], "train") + _mean_records([r.evals for r in runs], "eval")
    )
    return RunCurves(label, records)


def _baseline(runs: list[RunCurves]) -> RunCurves:
    return next((r for r in runs if r.label == "random"), runs[0])


def _mean_of(values: np.ndarray) -> float:
    """Mean of the finite entries; NaN (without a warning) when there are none, e.g. a key
    that logs from older versions lack."""
    finite = values[~np.isnan(values)]
    return float(finite.mean()) if finite.size else float("nan")


def _per_rollout(run: RunCurves, base: RunCurves) -> tuple[list[float | None], list[float | None]]:
    """TTB and BSF of ``run`` against ``base`` with rollouts spent as the x-axis (None where a
    run's rollout counts do not grow between evaluations, which only a damaged log gives)."""
    x, bx = run.eval_rollouts, base.eval_rollouts
    if len(run.evals) == 0 or len(base.evals) == 0 or np.any(np.diff(x) <= 0) or np.any(np.diff(bx) <= 0):
        return [None] * len(TTB_FRACTIONS), [None] * len(BSF_BUDGETS)
    return (
        time_to_baseline(x, run.eval_acc, bx, base.eval_acc, TTB_FRACTIONS),
        best_so_far(x, run.eval_acc, bx, base.eval_acc, BSF_BUDGETS),
    )


def comparison_rows(runs: list[RunCurves]) -> list[Row]:
    base = _baseline(runs)
    ordered = [base] + [r for r in runs if r is not base]
    rows = []
    for r in ordered:
        ok = len(r.evals) > 0 and len(base.evals) > 0
        ttb_rollouts, bsf_rollouts = _per_rollout(r, base)
        rows.append(
            Row(
                label=r.label,
                key=r.label,
                ttb=time_to_baseline(r.eval_steps, r.eval_acc, base.eval_steps, base.eval_acc, TTB_FRACTIONS)
                if ok
                else [None] * len(TTB_FRACTIONS),
                bsf=best_so_far(r.eval_steps, r.eval_acc, base.eval_steps, base.eval_acc, BSF_BUDGETS)
                if ok
                else [None] * len(BSF_BUDGETS),
                etr=float(np.nanmean(r.col("etr"))),
                below_one=float(np.nanmean(r.col("below_one"))),
                above_zero=float(np.nanmean(r.col("above_zero"))),
                rollouts=float(np.nanmean(r.col("rollouts")) / max(r.per_step, 1)),
                final=float(r.eval_acc[-1]) if len(r.evals) else float("nan"),
                ttb_rollouts=ttb_rollouts,
                bsf_rollouts=bsf_rollouts,
                strict_valid=_mean_of(r.col("strict_valid")),
            )
        )
    return rows


def comparison_markdown(runs: list[RunCurves]) -> str:
    return markdown_table(comparison_rows(runs))


def timing_markdown(runs: list[RunCurves]) -> str:
    """Medians over steps of where the time goes."""
    lines = [
        "| Method | step (s) | generation (s) | rewards (s) | training (s) | gen tokens/s | train tokens/s "
        "| select (ms) | update (ms) | mean reward | start → final held-out acc |",
        "|---|" + "---:|" * 10,
    ]
    for r in runs:
        med = {
            k: _median(r.col(k))
            for k in (
                "step_s",
                "gen_s",
                "reward_s",
                "train_s",
                "gen_tokens_per_s",
                "train_tokens_per_s",
                "select_ms",
                "update_ms",
            )
        }
        acc = r.eval_acc
        lines.append(
            f"| {r.label} | {med['step_s']:.2f} | {med['gen_s']:.2f} | {med['reward_s']:.2f} | {med['train_s']:.2f} "
            f"| {med['gen_tokens_per_s']:.0f} | {med['train_tokens_per_s']:.0f} | {med['select_ms']:.3f} "
            f"| {med['update_ms']:.3f} | {float(np.nanmean(r.col('reward_mean'))):.3f} "
            f"| {acc[0]:.3f} → {acc[-1]:.3f} |"
            if len(acc)
            else f"| {r.label} | … |"
        )
    return "\n".join(lines)


def _mean_pm(values: list[float], digits: int = 3) -> str:
    """``mean ± half-width`` of the 95% Student-t interval (over seeds)."""
    mean, half = mean_ci(np.asarray(values, dtype=np.float64))
    return f"{float(mean):.{digits}f} ± {float(half):.{digits}f}"


def distinct_tasks(run: RunCurves) -> int:
    """How many different tasks the run trained on: a selector that keeps choosing the same few
    tasks shows here (and tends to overfit them)."""
    return len({int(i) for r in run.train for i in (r.get("task_ids") or [])})


def seeds_markdown(groups: dict[str, list[RunCurves]]) -> str:
    """Per method over seeds: final and best held-out accuracy, mean ETR, training reward and
    distinct tasks trained on as mean ± 95% half-width (Student t), and each seed's final accuracy."""
    lines = [
        "| Method | seeds | final held-out acc | best held-out acc | ETR | mean training reward "
        "| distinct tasks trained on | final acc per seed |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for label, runs in groups.items():
        done = [r for r in runs if len(r.evals)]
        finals = [float(r.eval_acc[-1]) for r in done]
        lines.append(
            f"| {label} | {len(runs)} | {_mean_pm(finals)} | {_mean_pm([float(r.eval_acc.max()) for r in done])} "
            f"| {_mean_pm([float(np.nanmean(r.col('etr'))) for r in runs])} "
            f"| {_mean_pm([float(np.nanmean(r.col('reward_mean'))) for r in runs])} "
            f"| {_mean_pm([float(distinct_tasks(r)) for r in runs], digits=0)} "
            f"| {', '.join(f'{f:.3f}' for f in finals)} |"
        )
    return "\n".join(lines)


def mean_etr(groups: dict[str, list[RunCurves]]) -> dict[str, float]:
    """Each method's mean training ETR: the mean over its runs of each run's mean over steps."""
    out = {}
    for label, runs in groups.items():
        values = [float(np.nanmean(r.col("etr"))) for r in runs if r.train]
        if values:
            out[label] = float(np.mean(values))
    return out


def reselection(run: RunCurves) -> tuple[float, float]:
    """How the run came back to its tasks: the share of its picks that chose a task it had
    trained on before, and the median number of steps between a task's consecutive selections
    (NaN when no task was chosen twice)."""
    last: dict[int, int] = {}
    gaps: list[int] = []
    picks = again = 0
    for rec in run.train:
        step = int(rec.get("step", 0))
        for t in rec.get("task_ids") or []:
            t = int(t)
            picks += 1
            if t in last:
                again += 1
                gaps.append(step - last[t])
            last[t] = step
    share = again / picks if picks else math.nan
    return share, float(np.median(gaps)) if gaps else math.nan


def selection_markdown(groups: dict[str, list[RunCurves]]) -> str:
    """Per method over seeds (mean ± 95% half-width): mean training ETR, the share of picks that
    re-selected a task, the median gap between a task's selections, distinct tasks, and the
    estimator's μ̃ at the run's first, middle and last step where the method logs one."""
    lines = [
        "| Method | seeds | ETR | re-selection share | median gap (steps) | distinct tasks | μ̃ first / middle / last |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for label, runs in groups.items():
        runs = [r for r in runs if r.train]
        if not runs:
            continue
        stats = [reselection(r) for r in runs]
        gaps = [g for _, g in stats if g == g]
        mu = "—"
        curves = [r.col("capability") for r in runs]
        if all(c.size and np.isfinite(c).any() for c in curves):
            n = min(c.size for c in curves)
            at = (0, n // 2, n - 1)
            mu = " / ".join(f"{float(np.nanmean([c[i] for c in curves])):.3f}" for i in at)
        lines.append(
            f"| {label} | {len(runs)} | {_mean_pm([float(np.nanmean(r.col('etr'))) for r in runs])} "
            f"| {_mean_pm([s for s, _ in stats])} | {_mean_pm(gaps, digits=1) if gaps else '—'} "
            f"| {_mean_pm([float(distinct_tasks(r)) for r in runs], digits=0)} | {mu} |"
        )
    return "\n".join(lines)


def best_within(run: RunCurves, rollouts: float) -> float:
    """The run's best held-out accuracy among the evaluations made after at most ``rollouts``
    rollouts (NaN when it made none within them)."""
    acc = run.eval_acc[run.eval_rollouts <= rollouts + 1e-9]
    return float(acc.max()) if acc.size else float("nan")


def _welch_pm(a: np.ndarray, b: np.ndarray, digits: int = 3) -> str:
    """``mean(a) - mean(b) ± half-width`` of the 95% Welch interval (unequal variances; the
    Welch-Satterthwaite degrees of freedom, rounded down)."""
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    if a.size < 2 or b.size < 2:
        return f"{float(a.mean() - b.mean()) if a.size and b.size else float('nan'):+.{digits}f}"
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = float(np.sqrt(va + vb))
    if se == 0.0:
        return f"{float(a.mean() - b.mean()):+.{digits}f} ± {0.0:.{digits}f}"
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    d = max(1, int(np.floor(df)))
    t = _T975[d - 1] if d <= len(_T975) else 1.96
    return f"{float(a.mean() - b.mean()):+.{digits}f} ± {t * se:.{digits}f}"


def budget_markdown(groups: dict[str, list[RunCurves]]) -> str:
    """Every method held to the baseline's rollout budget (Random's, else the first method's:
    the fewest rollouts any of its seeds spent): per method over seeds, the rollouts it spent in
    all, its best held-out accuracy within the budget (mean ± 95% half-width) and its difference from
    the baseline's (± the 95% Welch half-width). Dynamic sampling pays for every group it rolls out, so it reaches the
    budget in fewer steps."""
    base_label = "random" if "random" in groups else next(iter(groups))
    base_runs = [r for r in groups[base_label] if len(r.evals)]
    lines = [
        "| Method | seeds | rollouts spent (all steps) | best held-out acc within the budget "
        f"| difference from {base_label} |",
        "|---|---:|---:|---:|---:|",
    ]
    if not base_runs:
        return "\n".join(lines)
    budget = float(min(r.eval_rollouts[-1] for r in base_runs))
    base_best = np.asarray([best_within(r, budget) for r in base_runs])
    for label, runs in groups.items():
        done = [r for r in runs if len(r.evals)]
        best = np.asarray([best_within(r, budget) for r in done])
        diff = "-" if label == base_label else _welch_pm(best, base_best)
        lines.append(
            f"| {label} | {len(runs)} | {_mean_pm([float(r.eval_rollouts[-1]) for r in done], digits=0)} "
            f"| {_mean_pm(best.tolist())} | {diff} |"
        )
    return "\n".join(lines) + f"\n\nBudget: {budget:.0f} rollouts ({base_label})."


def _score_batch(p: np.ndarray, rate: np.ndarray, trials: Any, pears: list[float], aucs: list[float]) -> None:
    """One batch's implicit evidence ``p`` (NaN: none) against its observed ``rate``s out of
    ``trials`` (a count, or one per task): its Pearson correlation (where both vary) into
    ``pears`` and the ROC AUC of P(0 < successes < n | p̃) for the effective tasks into ``aucs``,
    over the tasks with a prediction, when there are at least 3."""
    ok = ~np.isnan(p)
    if ok.sum() < 3:
        return
    if np.ptp(p[ok]) > 0 and np.ptp(rate[ok]) > 0:
        pears.append(pearson(p[ok], rate[ok]))
    n_ok = trials[ok] if isinstance(trials, np.ndarray) else trials
    auc = roc_auc(effective_probability(p[ok], n_ok), (rate[ok] > 0) & (rate[ok] < 1))
    if auc == auc:
        aucs.append(auc)


def evidence_quality(run: RunCurves, weak: np.ndarray, strong: np.ndarray) -> dict[str, float] | None:
    """How well the interpolation estimate predicted each batch before it was rolled out, as in
    ``bots simulate``: at step t, p̃ = clip(μ̃_{t-1}·strong + (1 − μ̃_{t-1})·weak) over the batch's
    tasks against their observed success rates (Pearson) and against whether they were effective,
    0 < successes < n (ROC AUC of P(effective | p̃)). Means over steps; None when the run logged no
    μ̃ (no estimator) or chose no task with both references."""
    n = int(run.config.get("rollouts", 0)) or 1
    pears: list[float] = []
    aucs: list[float] = []
    prev_mu: float | None = None
    for rec in run.train:
        ids, succ = rec.get("task_ids"), rec.get("successes")
        if prev_mu is not None and ids is not None and succ is not None:
            idx = np.asarray(ids, dtype=np.int64)
            p = np.clip(prev_mu * strong[idx] + (1.0 - prev_mu) * weak[idx], 0.0, 1.0)
            # A bots-plan record gives each task its own count; the others n each.
            counts = rec.get("rollout_counts")
            trials: Any = n if counts is None else np.asarray(counts, dtype=np.float64)
            _score_batch(p, np.asarray(succ, dtype=np.float64) / trials, trials, pears, aucs)
        mu = rec.get("capability")
        prev_mu = float(mu) if mu is not None else prev_mu
    if not pears and not aucs:
        return None
    mus = [float(r["capability"]) for r in run.train if r.get("capability") is not None]
    return {
        "pearson": float(np.mean(pears)) if pears else float("nan"),
        "auc": float(np.mean(aucs)) if aucs else float("nan"),
        "steps": float(len(aucs)),
        "final_mu": mus[-1] if mus else float("nan"),
    }


def shadow_evidence_quality(run: RunCurves, weak: np.ndarray, strong: np.ndarray) -> dict[str, float] | None:
    """:func:`evidence_quality` of an interpolation estimator that only watched ``run``'s batches
    (a fresh :class:`~bots_rft.Interpolation` with the run's momentum and min_gap, fed each
    logged batch in turn, the run's ``rollouts`` trials per task). On a Random run the batches are
    uniform draws, so this measures the implicit evidence itself, free of the choices a selector
    that reads it makes."""
    from .. import _core
    from ..estimators import Interpolation
    from ..parameters import MIN_GAP, MOMENTUM

    n = int(run.config.get("rollouts", 0)) or 1
    momentum = float(run.config.get("momentum", MOMENTUM.default))
    est = Interpolation(weak, strong, momentum, min_gap=float(run.config.get("min_gap", MIN_GAP.default)))
    records: list[dict[str, Any]] = [{"kind": "config", "config": run.config}]
    for rec in run.train:
        ids, succ = rec.get("task_ids"), rec.get("successes")
        if ids and succ is not None:
            counts = rec.get("rollout_counts")
            trials = np.full(len(ids), float(n)) if counts is None else np.asarray(counts, dtype=np.float64)
            batch = _core.aggregate(
                len(est), np.asarray(ids, dtype=np.int64), np.asarray(succ, dtype=np.float64), trials
            )
            est.commit(est.observe(batch))
        # evidence_quality predicts each batch from the capability logged with the step before.
        records.append({**rec, "capability": est.capability})
    return evidence_quality(RunCurves(run.label, records), weak, strong)


def regression_evidence_quality(
    run: RunCurves, embeddings: np.ndarray, forgetting: float, prior_precision: float
) -> dict[str, float] | None:
    """How well bots-embed's estimator (:class:`~bots_rft.estimators.EmbeddingRegression` over
    ``embeddings``, the pool's row order) predicted each of ``run``'s batches before it was rolled
    out, fed the run's batches in turn: at step t, p̃ from the steps before t against the batch's
    observed rates (Pearson) and against whether each task was effective, 0 < successes < n (ROC
    AUC of P(effective | p̃)), as :func:`evidence_quality` measures the interpolation. Replaying a
    Random run measures the estimator itself, free of the picks a selector reading it makes.
    Means over steps; None when no step could be scored."""
    from .. import _core
    from ..estimators import EmbeddingRegression

    n = int(run.config.get("rollouts", 0)) or 1
    est = EmbeddingRegression(embeddings, forgetting=forgetting, prior_precision=prior_precision)
    pears: list[float] = []
    aucs: list[float] = []
    for rec in run.train:
        ids, succ = rec.get("task_ids"), rec.get("successes")
        if not ids or succ is None:
            continue
        idx = np.asarray(ids, dtype=np.int64)
        counts = rec.get("rollout_counts")
        trials = np.full(idx.size, float(n)) if counts is None else np.asarray(counts, dtype=np.float64)
        p = est.predict_at(idx)
        if p is not None:
            _score_batch(p, np.asarray(succ, dtype=np.float64) / trials, trials, pears, aucs)
        batch = _core.aggregate(len(est), idx, np.asarray(succ, dtype=np.float64), trials)
        est.commit(est.observe(batch))
    if not pears and not aucs:
        return None
    return {
        "pearson": float(np.mean(pears)) if pears else float("nan"),
        "auc": float(np.mean(aucs)) if aucs else float("nan"),
        "steps": float(len(aucs)),
    }


def regression_evidence_markdown(
    groups: dict[str, list[RunCurves]],
    embeddings: np.ndarray,
    methods: list[str],
    forgetting: float,
    prior_precision: float,
    shadow: str | None = None,
) -> str | None:
    """One row per method of ``methods`` (those whose implicit evidence is bots-embed's regression):
    Pearson and AUC of its p̃ against the next batch, replayed on the method's own batches; with
    ``shadow`` (Random), one more row replaying that method's uniform batches."""
    lines = [
        "| Batches replayed | Pearson (p̃ vs next batch's rates) | ROC AUC (effective) | runs |",
        "|---|---:|---:|---:|",
    ]
    rows = [(f"{m}'s own", groups[m]) for m in methods if m in groups]
    if shadow is not None and shadow in groups:
        rows.append((f"shadow on {shadow}'s batches", groups[shadow]))
    for label, runs in rows:
        qs = [q for q in (regression_evidence_quality(r, embeddings, forgetting, prior_precision) for r in runs) if q]
        if qs:
            corr, auc = (_mean_pm([q[key] for q in qs], 2) for key in ("pearson", "auc"))
            lines.append(f"| {label} | {corr} | {auc} | {len(qs)} |")
    return "\n".join(lines) if len(lines) > 2 else None


def evidence_markdown(
    groups: dict[str, list[RunCurves]], weak: np.ndarray, strong: np.ndarray, shadow: str | None = None
) -> str | None:
    """One row per method whose runs logged μ̃: Pearson and AUC of the implicit evidence against
    the next batch, and the final μ̃ (mean ± 95% half-width over seeds). ``shadow``: a method
    (Random) whose batches an estimator that chose none of them replays
    (:func:`shadow_evidence_quality`), one more row."""
    lines = [
        "| Method | Pearson (p̃ vs next batch's rates) | ROC AUC (effective) | final μ̃ | runs |",
        "|---|---:|---:|---:|---:|",
    ]
    rows = [(label, [evidence_quality(r, weak, strong) for r in runs]) for label, runs in groups.items()]
    if shadow is not None and shadow in groups:
        rows.append(
            (f"shadow on {shadow}'s batches", [shadow_evidence_quality(r, weak, strong) for r in groups[shadow]])
        )
    for label, found in rows:
        qs = [q for q in found if q is not None]
        if not qs:
            continue

        corr, auc, final_mu = (_mean_pm([q[key] for q in qs], 2) for key in ("pearson", "auc", "final_mu"))
        lines.append(f"| {label} | {corr} | {auc} | {final_mu} | {len(qs)} |")
    return "\n".join(lines) if len(lines) > 2 else None


def _at(x: np.ndarray, acc: np.ndarray, budget: float) -> float:
    """Held-out accuracy at the last evaluation made within ``budget`` on the x-axis ``x``."""
    inside = np.nonzero(x <= budget + 1e-9)[0]
    return float(acc[inside[-1]]) if inside.size else float("nan")


def _paired_pm(diffs: list[float], digits: int = 3) -> str:
    """``mean ± half-width`` of the 95% Student-t interval of paired differences, flagged when the
    interval excludes 0."""
    arr = np.asarray([d for d in diffs if d == d], dtype=np.float64)
    if arr.size == 0:
        return "-"
    mean, half = (float(v) for v in mean_ci(arr))
    mark = " *" if arr.size > 1 and abs(mean) > half else ""
    return f"{mean:+.{digits}f} ± {half:.{digits}f}{mark}"


def paired_markdown(groups: dict[str, list[RunCurves]]) -> str:
    """Each method against the baseline (Random's runs, else the first method's), paired by
    seed (same warm-up, same seed): differences in held-out accuracy at the end, averaged over
    every evaluation (the area under the curve per evaluation), at the baseline's rollout budget
    and at the baseline's training wall-clock (each the last evaluation within it), as mean ±
    95% half-width over seeds; ``*`` marks an interval that excludes 0."""
    base_label = "random" if "random" in groups else next(iter(groups))
    base = {str(r.config.get("seed")): r for r in groups[base_label] if len(r.evals)}
    lines = [
        f"| Method | paired seeds | final acc − {base_label} | mean acc over the run − {base_label} "
        f"| acc at {base_label}'s rollouts − {base_label} | acc at {base_label}'s wall-clock − {base_label} |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, runs in groups.items():
        if label == base_label:
            continue
        final, mean_acc, by_rollouts, by_time = [], [], [], []
        for r in runs:
            b = base.get(str(r.config.get("seed")))
            if b is None or not len(r.evals):
                continue
            final.append(float(r.eval_acc[-1] - b.eval_acc[-1]))
            mean_acc.append(float(r.eval_acc.mean() - b.eval_acc.mean()))
            by_rollouts.append(_at(r.eval_rollouts, r.eval_acc, float(b.eval_rollouts[-1])) - float(b.eval_acc[-1]))
            by_time.append(_at(r.eval_seconds, r.eval_acc, float(b.eval_seconds[-1])) - float(b.eval_acc[-1]))
        lines.append(
            f"| {label} | {len(final)} | {_paired_pm(final)} | {_paired_pm(mean_acc)} "
            f"| {_paired_pm(by_rollouts)} | {_paired_pm(by_time)} |"
        )
    return "\n".join(lines)


def plot_held_out(groups: dict[str, list[RunCurves]], path: str | Path, title: str = "", metric: str = "") -> Path:
    """Held-out accuracy against training steps, rollouts spent and training wall-clock (mean
    over seeds and its 95% band; the x of the last two panels is the seeds' mean)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.2), sharey=True)
    for i, (label, members) in enumerate(groups.items()):
        members = [r for r in members if len(r.evals)]
        if not members:
            continue
        color = plt.get_cmap("tab10")(i % 10)
        n = min(len(r.evals) for r in members)
        ys = np.stack([r.eval_acc[:n] for r in members])
        mean, half = mean_ci(ys)
        xs = (
            members[0].eval_steps[:n],
            np.mean([r.eval_rollouts[:n] for r in members], axis=0),
            np.mean([r.eval_seconds[:n] for r in members], axis=0),
        )
        for ax, x in zip(axes, xs):
            ax.plot(x, mean, color=color, lw=1.3, marker="o", ms=2.5, label=f"{label} ({len(members)} seeds)")
            if np.any(half > 0):
                ax.fill_between(
                    x, np.clip(mean - half, 0, 1), np.clip(mean + half, 0, 1), color=color, alpha=0.15, lw=0
                )
    for ax, name in zip(axes, ("training step", "rollouts spent", "training wall-clock (s)")):
        ax.set_xlabel(name)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"held-out accuracy{f' ({metric})' if metric else ''}")
    axes[0].legend(fontsize=8)
    return _save_figure(fig, path, title)


def _save_figure(fig: Any, path: str | Path, title: str) -> Path:
    """Title, lay out, write (creating the directory) and close ``fig``; the path written."""
    import matplotlib.pyplot as plt

    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def _median(values: np.ndarray) -> float:
    finite = values[~np.isnan(values)]
    return float(np.median(finite)) if finite.size else float("nan")


def plot_runs(runs: list[RunCurves] | dict[str, list[RunCurves]], path: str | Path, title: str = "") -> Path:
    """Held-out accuracy, ETR and mean training reward against steps, and held-out accuracy
    against rollouts spent (mean over seeds), one line per method; with several seeds per method
    (a dict of label -> runs), the mean and its 95% band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = runs if isinstance(runs, dict) else {r.label: [r] for r in runs}
    fig, axes = plt.subplots(1, 4, figsize=(20, 3.8))
    for i, (label, members) in enumerate(groups.items()):
        color = plt.get_cmap("tab10")(i % 10)
        n_eval = min(len(r.evals) for r in members)
        n_train = min(len(r.train) for r in members)
        panels = (
            (axes[0], members[0].eval_steps[:n_eval], [r.eval_acc[:n_eval] for r in members]),
            (axes[1], members[0].col("step")[:n_train], [r.col("etr")[:n_train] for r in members]),
            (axes[2], members[0].col("step")[:n_train], [r.col("reward_mean")[:n_train] for r in members]),
            (
                axes[3],
                np.mean([r.eval_rollouts[:n_eval] for r in members], axis=0),
                [r.eval_acc[:n_eval] for r in members],
            ),
        )
        for ax, x, ys in panels:
            mean, half = mean_ci(np.stack(ys))
            ax.plot(
                x,
                mean,
                label=f"{label} ({len(members)} seeds)" if len(members) > 1 else label,
                color=color,
                lw=1.2,
                marker="o" if ax in (axes[0], axes[3]) else None,
                ms=3,
            )
            if np.any(half > 0):
                # Every panel is a rate in [0, 1]; a t-interval over 3 seeds can overshoot it.
                lo, hi = np.clip(mean - half, 0.0, 1.0), np.clip(mean + half, 0.0, 1.0)
                ax.fill_between(x, lo, hi, color=color, alpha=0.18, lw=0)
    titles = (
        "held-out accuracy (greedy)",
        "ETR (0 < successes < n)",
        "mean training reward",
        "held-out accuracy per rollout spent",
    )
    for ax, name in zip(axes, titles):
        ax.set_xlabel("rollouts spent" if ax is axes[3] else "step")
        ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    return _save_figure(fig, path, title)
