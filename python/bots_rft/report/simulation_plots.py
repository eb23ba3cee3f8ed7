"""PNG figures of an experiment, in the layout of the paper's figures (matplotlib, Agg backend).

- ``curves_<group>.png``: ETR, <1 ratio, >0 ratio and held-out score against steps, and the
  held-out score against rollouts spent (in units of batch × n, so that one step of a method that
  rolls out batch × n is one unit), mean over seeds with 95% intervals, one line per row of the
  group's table;
- ``score_methods.png``: the methods table's held-out score gain per training step and per
  rollout spent, side by side (the x-axes of the headline tables);
- ``heatmap_random_vs_bots.png``: share of selected tasks at each empirical rate 0/n..n/n per
  step, Random on top, BOTS below (appendix F's figure);
- ``evidence_quality.png``: Pearson and ROC AUC of the interpolation estimator's p̃ against the
  next batch's empirical rates, per step;
- ``calibration.png``: how well each method's posterior predicted its picks' outcomes (Brier
  score, expected calibration error, Spearman rank correlation; :mod:`bots_rft.metrics.calibration`) and
  the share of zero-variance groups, per step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..metrics import mean_ci, rollout_axis
from ..simulate.experiment import ExperimentResult, MethodSpec
from .simulation import GROUP_TITLES, heatmap_of

__all__ = ["write_plots"]

_PANELS = (
    ("etr", "ETR (0 < rate < 1)"),
    ("below_one", "<1 ratio (rate < 1)"),
    ("above_zero", ">0 ratio (rate > 0)"),
    ("perf", "held-out score gain since step 0"),
)


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # never needs a display
    import matplotlib.pyplot as plt

    return plt


def _colors(n: int) -> list[Any]:
    plt = _plt()
    cmap = plt.get_cmap("tab10")
    return [cmap(i % 10) for i in range(n)]


def _band(ax: Any, x: np.ndarray, data: list[np.ndarray], label: str, color: Any, **kw: Any) -> None:
    mean, half = mean_ci(np.stack(data))
    ax.plot(x, mean, label=label, color=color, lw=1.4, **kw)
    if np.any(half > 0):
        ax.fill_between(x, mean - half, mean + half, color=color, alpha=0.18, lw=0)


def plot_group(result: ExperimentResult, group: str, path: Path) -> Path:
    plt = _plt()
    rows = result.groups[group]
    fig, axes = plt.subplots(1, len(_PANELS) + 1, figsize=(21, 3.8))
    c = result.config
    unit = c.batch_size * c.learner.n_rollouts
    colors = _colors(len(rows))
    for (label, spec), color in zip(rows, colors):
        recs = result.records(spec)
        style = {"ls": "--"} if spec.kind == "random" else {}
        for ax, (attr, _) in zip(axes, _PANELS):
            data = [np.asarray(getattr(r, attr), dtype=np.float64) for r in recs]
            if attr == "perf":
                # Seeds draw different worlds; the gain removes their different starting scores.
                data = [d - d[0] for d in data]
            x = np.arange(data[0].size) + (0 if attr == "perf" else 1)
            _band(ax, x, data, label, color, **style)
        # The score per rollout spent: seeds spend about the same, so their mean is the x-axis.
        spent = np.mean([rollout_axis(r.rollouts) for r in recs], axis=0) / unit
        _band(axes[-1], spent, [np.asarray(r.perf) - r.perf[0] for r in recs], label, color, **style)
    axes[-1].set_title("held-out score gain per rollout spent", fontsize=10)
    axes[-1].set_xlabel("rollouts spent (÷ batch × n)")
    axes[-1].grid(alpha=0.3)
    for ax, (attr, title) in zip(axes, _PANELS):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if attr != "perf":
            ax.set_ylim(0.0, 1.02)  # ratios; the interval band may overshoot with few seeds
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(
        f"{GROUP_TITLES.get(group, group)}: N={c.learner.num_tasks:,}, batch {c.batch_size}, "
        f"n={c.learner.n_rollouts}, {len(c.seeds)} seeds (mean, 95% CI)",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _find(result: ExperimentResult, kind: str) -> tuple[str, MethodSpec] | None:
    for label, spec in result.groups.get("methods", []):
        if spec.kind == kind:
            return label, spec
    return None


def plot_heatmaps(result: ExperimentResult, path: Path) -> Path | None:
    pairs = [p for p in (_find(result, "random"), _find(result, "bots")) if p is not None]
    if not pairs:
        return None
    plt = _plt()
    n = result.config.learner.n_rollouts
    fig, axes = plt.subplots(len(pairs), 1, figsize=(11, 3.2 * len(pairs)), squeeze=False)
    for ax, (label, spec) in zip(axes[:, 0], pairs):
        heat = heatmap_of(result, spec)
        im = ax.imshow(
            heat.T,
            origin="lower",
            aspect="auto",
            cmap="viridis",
            vmin=0,
            extent=(0.5, heat.shape[0] + 0.5, -0.5, n + 0.5),
        )
        ax.set_title(f"{label}: share of selected tasks by empirical success rate", fontsize=10)
        ax.set_ylabel(f"successes / {n}")
        ax.set_xlabel("step")
        fig.colorbar(im, ax=ax, pad=0.01)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_evidence(result: ExperimentResult, path: Path) -> Path | None:
    tracked: list[tuple[str, MethodSpec]] = []
    for label, spec in result.groups.get("methods", []):
        recs = result.records(spec)
        if not np.all(np.isnan(np.stack([r.pearson_next for r in recs]))):
            name = "Random (shadow estimator)" if spec.kind == "random" else label
            tracked.append((name, spec))
    if not tracked:
        return None
    plt = _plt()
    panels = (
        ("pearson_next", "Pearson: p̃ vs next batch's rates"),
        ("auc_next", "ROC AUC: effective vs not (next batch)"),
        ("pearson_true", "Pearson: p̃ vs true p (whole pool)"),
        ("capability", "capability coefficient μ̃"),
    )
    fig, axes = plt.subplots(1, len(panels), figsize=(17, 3.6))
    for (name, spec), color in zip(tracked, _colors(len(tracked))):
        recs = result.records(spec)
        for ax, (attr, _) in zip(axes, panels):
            data = [np.asarray(getattr(r, attr), dtype=np.float64) for r in recs]
            x = np.arange(1, data[0].size + 1)
            _band(ax, x, data, name, color)
    for ax, (_, title), lim in zip(axes, panels, ((-1, 1), (0, 1), (-1, 1), None)):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if lim is not None:
            ax.set_ylim(*lim)
    axes[1].axhline(0.5, color="grey", lw=0.8, ls=":")
    axes[0].legend(fontsize=8)
    fig.suptitle("Interpolation-based implicit evidence (mean over seeds, 95% CI)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_calibration(result: ExperimentResult, path: Path) -> Path | None:
    """Calibration of the picks per step, one line per method of the "methods" table (methods
    without a posterior appear in the zero-variance panel only)."""
    rows = result.groups.get("methods", [])
    if not rows or not hasattr(result.records(rows[0][1])[0], "brier"):
        return None
    plt = _plt()
    panels = (
        ("brier", "Brier score of predicted pass rate ↓"),
        ("ece", "expected calibration error ↓"),
        ("spearman", "Spearman: predicted vs observed k/n ↑"),
        ("zero_variance", "zero-variance groups (k = 0 or n) ↓"),
    )
    fig, axes = plt.subplots(1, len(panels), figsize=(17, 3.6))
    for (label, spec), color in zip(rows, _colors(len(rows))):
        recs = result.records(spec)
        style = {"ls": "--"} if spec.kind == "random" else {}
        for ax, (attr, _) in zip(axes, panels):
            data = [np.asarray(getattr(r, attr), dtype=np.float64) for r in recs]
            if all(np.all(np.isnan(d)) for d in data):
                continue
            _band(ax, np.arange(1, data[0].size + 1), data, label, color, **style)
    for ax, (_, title) in zip(axes, panels):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[-1].legend(fontsize=8)
    fig.suptitle("Calibration of the selector's predictions for its picks (mean over seeds, 95% CI)", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def plot_score(result: ExperimentResult, group: str, path: Path) -> Path:
    """The held-out score gain of each row of ``group`` per training step and per rollout spent
    (÷ batch × n), side by side, mean over seeds with 95% intervals: the two x-axes of the
    headline tables."""
    plt = _plt()
    rows = result.groups[group]
    c = result.config
    unit = c.batch_size * c.learner.n_rollouts
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.6))
    for i, ((label, spec), color) in enumerate(zip(rows, _colors(len(rows)))):
        recs = result.records(spec)
        # Past ten lines the palette repeats: the second round is dotted.
        style = {"ls": "--"} if spec.kind == "random" else ({"ls": ":"} if i >= 10 else {})
        gains = [np.asarray(r.perf, dtype=np.float64) - r.perf[0] for r in recs]
        _band(axes[0], np.arange(gains[0].size), gains, label, color, **style)
        spent = np.mean([rollout_axis(r.rollouts) for r in recs], axis=0) / unit
        _band(axes[1], spent, gains, label, color, **style)
    axes[0].set_xlabel("training step")
    axes[1].set_xlabel("rollouts spent (÷ batch × n)")
    axes[1].set_xlim(0, c.steps)  # Random's budget; methods that spend more per step run past it
    for ax, title in zip(axes, ("per training step", "per rollout spent")):
        ax.set_title(f"held-out score gain {title}", fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="upper left", ncol=2)
    fig.suptitle(
        f"{GROUP_TITLES.get(group, group)}: N={c.learner.num_tasks:,}, batch {c.batch_size}, "
        f"n={c.learner.n_rollouts}, {len(c.seeds)} seeds (mean, 95% CI)",
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def write_plots(result: ExperimentResult, out_dir: Path) -> list[Path]:
    out: list[Path] = []
    for group in result.groups:
        out.append(plot_group(result, group, out_dir / f"curves_{group}.png"))
    if "methods" in result.groups:
        out.append(plot_score(result, "methods", out_dir / "score_methods.png"))
    for p in (
        plot_heatmaps(result, out_dir / "heatmap_random_vs_bots.png"),
        plot_evidence(result, out_dir / "evidence_quality.png"),
        plot_calibration(result, out_dir / "calibration.png"),
    ):
        if p is not None:
            out.append(p)
    return out
