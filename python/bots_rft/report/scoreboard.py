"""Files of a scoreboard run (:mod:`bots_rft.simulate.scoreboard`): ``scoreboard.csv``,
``paired.csv``, ``scoreboard.md`` and one heat map per information setting
(``scoreboard_<information>.png``)."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import numpy as np

from ..simulate.scoreboard import AXES, OURS, ROUND_LATENCY, SCOREBOARD_LEARNER, ScoreboardResult

__all__ = ["write_scoreboard", "scoreboard_markdown", "SCOREBOARD_FILES"]

SCOREBOARD_FILES = ("scoreboard.csv", "paired.csv", "scoreboard.md")
_AXIS_TITLES = {"step": "per training step", "rollout": "per rollout spent", "wallclock": "per modelled wall-clock"}
_INFO_TITLES = {
    "paper": "each method as published (BOTS and AdaRFT read the reference pass rates; DPS and Knapsack-RL start blind)",
    "shared": "every method that can use the reference pass rates reads them (DPS and Knapsack-RL start from the weak reference's)",
    "none": "no method reads reference pass rates (BOTS on its own rollouts alone; AdaRFT cannot run)",
}
_SYMBOL = {"ahead": "▲", "behind": "▼", "level": "=", "n/a": "·"}


def _cell(row: dict[str, Any] | None, digits: int, seeds: int) -> str:
    """``mean ± half-width``, ``(k/S)`` when only k of the S seeds reached it, ``-`` when none did."""
    if row is None:
        return ""
    if row["seeds"] == 0:
        return "-"
    text = f"{row['mean']:.{digits}f} ± {(row['hi'] - row['mean']):.{digits}f}"
    return f"{text} ({row['seeds']}/{seeds})" if row["seeds"] < seeds else text


def _index(rows: list[dict[str, Any]], *keys: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    return {tuple(r[k] for k in keys): r for r in rows}


def scoreboard_markdown(result: ScoreboardResult, command: str | None = None) -> str:
    cfg = result.config
    seeds = len(cfg.seeds)
    idx = _index(result.rows, "regime", "information", "method", "axis", "metric")
    pidx = _index(result.paired, "regime", "information", "method", "peer", "axis", "metric")
    regimes = [r.name for r in cfg.regimes]
    lines = [
        "# Scoreboard: BOTS against the field",
        "",
        f"{'Quick run (small pools, 20 steps of 32): a smoke test, not results. ' if cfg.quick else ''}"
        f"{seeds} seeds per cell; every interval is a 95% Student-t interval over the seeds. "
        f"Simulated learner with group_noise = {SCOREBOARD_LEARNER['group_noise']:g} and repeat_decay = "
        f"{SCOREBOARD_LEARNER['repeat_decay']:g} unless a regime says otherwise. "
        f"Ran in {result.seconds:.0f} s.",
        "",
    ]
    if command:
        lines += ["```bash", command, "```", ""]
    lines += ["## Regimes", "", "| Regime | What | Tasks | Steps × batch | Epochs |", "|---|---|---:|---:|---:|"]
    for r in cfg.regimes:
        lines.append(
            f"| {r.name} | {r.summary} | {r.learner.num_tasks:,} | {r.steps} × {r.batch_size} | {r.epochs:.2f} |"
        )
    lines += [
        "",
        "## How to read it",
        "",
        "- **TTB 100%**: training steps / rollouts / modelled wall-clock a method needs to reach Random's best "
        "score, divided by what Random needs (lower is better; `-`: not reached within the run; `(k/S)`: reached "
        "on k of S seeds, the mean is over those). **BSF 100%**: the best score within Random's whole budget on "
        "that axis, divided by Random's best (higher is better).",
        f"- **Modelled wall-clock**: a generation call costs {ROUND_LATENCY:g} of a plain GRPO step plus its share "
        "of rollouts; sequential rounds (DAPO-DS, GRESO, SPEED-RL, Reinforce-Ada) pay the fixed part per round. "
        "See `bots_rft.simulate.scoreboard` for the model.",
        "- **Verdicts** compare BOTS (and BOTS-Screen) with each row seed by seed on BSF 100% (the same worlds): "
        "▲ ahead (the paired 95% interval excludes 0 in our favour), ▼ behind, = level, · too few seeds; three "
        "symbols per cell: per step, per rollout, per wall-clock. `paired.csv` has the numbers, TTB included.",
        "",
    ]
    for info in cfg.information:
        lines += [f"## Information: {info}", "", _INFO_TITLES[info] + ".", ""]
        for ours in OURS:
            lines += [f"### Verdicts: {ours} against each row (step / rollout / wall-clock, BSF 100%)", ""]
            lines += ["| Row | " + " | ".join(regimes) + " |", "|---|" + "---|" * len(regimes)]
            for e in cfg.entrants:
                cells = []
                for reg in regimes:
                    marks = [pidx.get((reg, info, ours, e.label, axis, "bsf_100")) for axis in AXES]
                    cells.append("" if marks[0] is None else " ".join(_SYMBOL[m["verdict"]] for m in marks if m))
                if any(cells):
                    lines.append(f"| {e.label} | " + " | ".join(cells) + " |")
            lines.append("")
        for axis in AXES:
            for metric, title in (("ttb_100", "TTB 100% ↓"), ("bsf_100", "BSF 100% ↑")):
                lines += [f"### {title}, {_AXIS_TITLES[axis]}", ""]
                lines += ["| Method | " + " | ".join(regimes) + " |", "|---|" + "---:|" * len(regimes)]
                for e in cfg.entrants:
                    cells = [
                        _cell(idx.get((reg, info, e.label, axis, metric)), 2 if metric == "ttb_100" else 3, seeds)
                        for reg in regimes
                    ]
                    if any(cells):
                        lines.append(f"| {e.label} | " + " | ".join(cells) + " |")
                lines.append("")
    lines += ["## The rows", "", "| Row | Method | Settings |", "|---|---|---|"]
    for e in cfg.entrants:
        lines.append(f"| {e.label} | `{e.kind}`{''.join(f' {k}={v}' for k, v in e.extra)} | {e.note} |")
    return "\n".join(lines) + "\n"


def _write_csv(path: Path, rows: list[dict[str, Any]], columns: tuple[str, ...]) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if isinstance(r[c], float) and math.isnan(r[c]) else r[c] for c in columns])


def _heatmap(result: ScoreboardResult, info: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cfg = result.config
    regimes = [r.name for r in cfg.regimes]
    labels = [e.label for e in cfg.entrants if e.runs_under(info)]
    idx = _index(result.rows, "regime", "information", "method", "axis", "metric")
    fig, axes = plt.subplots(1, len(AXES), figsize=(5.2 * len(AXES), 0.42 * len(labels) + 2.2), sharey=True)
    for ax, axis in zip(np.atleast_1d(axes), AXES):
        grid = np.full((len(labels), len(regimes)), np.nan)
        for i, lab in enumerate(labels):
            for j, reg in enumerate(regimes):
                row = idx.get((reg, info, lab, axis, "bsf_100"))
                if row is not None and row["seeds"]:
                    grid[i, j] = row["mean"]
        span = max(0.05, float(np.nanmax(np.abs(grid - 1.0))) if np.isfinite(grid).any() else 0.05)
        ax.imshow(grid, cmap="RdYlGn", vmin=1 - span, vmax=1 + span, aspect="auto")
        for i in range(len(labels)):
            for j in range(len(regimes)):
                if np.isfinite(grid[i, j]):
                    ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(regimes)), regimes, rotation=35, ha="right", fontsize=8)
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        ax.set_title(f"BSF 100% {_AXIS_TITLES[axis]}", fontsize=9)
    fig.suptitle(f"Best score within Random's budget ÷ Random's best (information: {info})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_scoreboard(result: ScoreboardResult, out: Path, command: str | None = None) -> list[Path]:
    """Every file of the run under ``out`` (created); the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / name for name in SCOREBOARD_FILES]
    _write_csv(
        written[0], result.rows, ("regime", "information", "method", "axis", "metric", "mean", "lo", "hi", "seeds")
    )
    _write_csv(
        written[1],
        result.paired,
        ("regime", "information", "method", "peer", "axis", "metric", "mean", "lo", "hi", "seeds", "verdict"),
    )
    written[2].write_text(scoreboard_markdown(result, command))
    for info in result.config.information:
        path = out / f"scoreboard_{info}.png"
        _heatmap(result, info, path)
        written.append(path)
    return written
