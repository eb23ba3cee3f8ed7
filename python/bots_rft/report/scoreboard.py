"""Files of a scoreboard run (:mod:`bots_rft.simulate.scoreboard`): ``scoreboard.csv``,
``paired.csv``, ``scoreboard.md`` and one heat map per information setting
(``scoreboard_<information>.png``)."""

from __future__ import annotations

import csv
import math
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np

from ..simulate.fitted import FITTED_FROM, FittedLearner
from ..simulate.scoreboard import (
    AXES,
    CHARGED,
    GENERATION,
    OURS,
    ROUND_LATENCY,
    SCOREBOARD_LEARNER,
    TRAINING,
    Regime,
    ScoreboardResult,
    reference_charge,
    reference_rollouts,
)

__all__ = ["write_scoreboard", "scoreboard_markdown", "where_bots_loses", "SCOREBOARD_FILES"]

SCOREBOARD_FILES = ("scoreboard.csv", "paired.csv", "scoreboard.md")
_AXIS_TITLES = {"step": "per training step", "rollout": "per rollout spent", "wallclock": "per modelled wall-clock"}
_INFO_TITLES = {
    "paper": "each method as published (BOTS and AdaRFT read the reference pass rates; DPS and Knapsack-RL start blind)",
    "shared": "every method that can use the reference pass rates reads them (DPS and Knapsack-RL start from the weak reference's)",
    "none": "no method reads reference pass rates (BOTS on its own rollouts alone; AdaRFT cannot run)",
    "charged": "the runs of 'paper' (the same selection), but every method that read the reference pass rates is "
    "charged what measuring them costs on the rollout and wall-clock axes",
}
_SYMBOL = {"ahead": "▲", "behind": "▼", "level": "=", "n/a": "·"}
#: A verdict cell where one side has no score within Random's budget and the other has one.
_UNREACHED_OURS, _UNREACHED_ROW = "▽", "△"
_AXIS_SHORT = {"step": "per step", "rollout": "per rollout", "wallclock": "per wall-clock"}
#: The row whose losses scoreboard.md states, and the peer it is set against without references.
_BOTS, _EMBED, _SPEED = "BOTS", "BOTS-Embed", "SPEED-RL"
_CAVEATS = (
    "BOTS-Screen 4x (like SPEED-RL 4x) trains on screening rollouts generated several steps before they are "
    "trained on (one 4x generation call fills a queue that the next steps drain); the simulator trains on them "
    "as if they were fresh and does not charge that staleness, so these rows are flattered by it.",
    "In the `drift` regime, TTB measures only the steps before the drop: the target, Random's best score, is "
    "reached before every skill drops, so TTB says how fast a method gets there, not how it recovers after "
    "the drop (BSF covers the whole run).",
)


def _learner_line() -> str:
    """The scoreboard's learner, as its header states it (from SCOREBOARD_LEARNER itself)."""
    fitted = FittedLearner(**{f.name: SCOREBOARD_LEARNER[f.name] for f in fields(FittedLearner)})
    return (
        f"Simulated learner with group_noise = {SCOREBOARD_LEARNER['group_noise']:g}, repeat_decay = "
        f"{SCOREBOARD_LEARNER['repeat_decay']:g} and the settings fitted to the real trainer "
        f"(fitted to: {FITTED_FROM}): {fitted.describe()}; unless a regime says otherwise."
    )


def _charge_lines(regimes: tuple[Regime, ...]) -> list[str]:
    """What the "charged" setting charges in each regime, with its numbers."""
    lines = []
    for r in regimes:
        c = r.learner
        rollouts, unit = reference_rollouts(c), r.batch_size * c.n_rollouts
        budget = r.steps * unit
        calls = -(-rollouts // unit)
        clock, random_clock = reference_charge(r, "wallclock"), r.steps * (ROUND_LATENCY + GENERATION + TRAINING)
        lines.append(
            f"- {r.name}: 2 × {c.num_tasks:,} × {c.ref_rollouts} = {rollouts:,} rollouts = {rollouts / budget:.3g} × "
            f"Random's budget of {r.steps} × {r.batch_size} × {c.n_rollouts} = {budget:,}; wall-clock "
            f"{calls:,} generation calls × {ROUND_LATENCY:g} + {rollouts / unit:.4g} × {GENERATION:g} = {clock:.4g} = "
            f"{clock / random_clock:.3g} × Random's {random_clock:.4g}."
        )
    return lines


def _mark(p: dict[str, Any] | None, mine: dict[str, Any] | None, theirs: dict[str, Any] | None) -> str:
    """A verdict's symbol; where the paired comparison has no seed because one side has no score
    within Random's budget and the other has one, ▽ (ours has none) or △ (the row has none)."""
    if p is None:
        return ""
    if p["verdict"] == "n/a" and mine is not None and theirs is not None:
        if mine["seeds"] == 0 and theirs["seeds"] > 0:
            return _UNREACHED_OURS
        if theirs["seeds"] == 0 and mine["seeds"] > 0:
            return _UNREACHED_ROW
    return _SYMBOL[p["verdict"]]


def _cells_text(cells: list[tuple[str, str, str, bool]], regimes: list[str], infos: list[str]) -> str:
    """(regime, information, axis, unreached) cells as "per step: r1 (i1, i2), r2 (i1); per rollout: …"
    (the information left out when there is one; ▽ marks a cell where BOTS has no score)."""
    parts = []
    for axis in AXES:
        by_regime = []
        for reg in regimes:
            got = [(i, u) for i in infos for (r, i2, a, u) in cells if (r, i2, a) == (reg, i, axis)]
            marks = [(i if len(infos) > 1 else "") + (f" {_UNREACHED_OURS}" if u else "") for i, u in got]
            if got:
                by_regime.append(reg + (f" ({', '.join(m.strip() for m in marks)})" if any(marks) else ""))
        if by_regime:
            parts.append(f"{_AXIS_SHORT[axis]}: {', '.join(by_regime)}")
    return "; ".join(parts)


def where_bots_loses(result: ScoreboardResult) -> list[str]:
    """Markdown lines stating, from the run's paired results (BSF 100%), every (regime,
    information, axis) cell where BOTS is behind (▼) a row or has no score within Random's budget
    while the row has one, and every cell where BOTS without references is behind or level with
    SPEED-RL; saying so where there is none."""
    cfg = result.config
    regimes, infos = [r.name for r in cfg.regimes], list(cfg.information)
    pidx = _index(result.paired, "regime", "information", "method", "peer", "axis", "metric")
    idx = _index(result.rows, "regime", "information", "method", "axis", "metric")
    lines = [
        "## Where BOTS loses",
        "",
        "Computed from this run's paired results (BOTS against each row, BSF 100%, seed by seed; `paired.csv`). "
        f"A cell is a (regime, information, axis); {_UNREACHED_OURS} marks a cell where BOTS has no score within "
        "Random's budget on that axis (its reference charge alone exceeds it) while the row has one.",
        "",
    ]
    total, behind, losing = 0, 0, []
    for e in cfg.entrants:
        if e.label == _BOTS:
            continue
        cells = []
        for reg in regimes:
            for info in infos:
                for axis in AXES:
                    p = pidx.get((reg, info, _BOTS, e.label, axis, "bsf_100"))
                    mine = idx.get((reg, info, _BOTS, axis, "bsf_100"))
                    theirs = idx.get((reg, info, e.label, axis, "bsf_100"))
                    if p is None and (mine is None or theirs is None):
                        continue
                    total += 1
                    mark = _mark(p, mine, theirs)
                    if mark in (_SYMBOL["behind"], _UNREACHED_OURS):
                        cells.append((reg, info, axis, mark == _UNREACHED_OURS))
        if cells:
            behind += len(cells)
            own = " (this package's)" if e.label in OURS else ""
            losing.append(
                f"- **{e.label}**{own}: BOTS behind in {len(cells)} cell{'s' * (len(cells) != 1)}: "
                f"{_cells_text(cells, regimes, infos)}."
            )
    if losing:
        lines += [f"BOTS is behind a row in {behind} of {total} (row, regime, information, axis) cells:", "", *losing]
    else:
        lines.append(f"BOTS is behind no row in any of the {total} (row, regime, information, axis) cells.")
    lines.append("")
    speeds = [e.label for e in cfg.entrants if e.label.startswith(_SPEED)]
    # BOTS without references, and BOTS-Embed, which reads none in any setting.
    unreferenced = [label for label in (_BOTS, _EMBED) if any(e.label == label for e in cfg.entrants)]
    if "none" in infos and speeds:
        lines += ["Without references (information: none), against SPEED-RL:", ""]
        for ours, peer in ((o, p) for o in unreferenced for p in speeds):
            got: dict[str, list[tuple[str, str, str, bool]]] = {"behind": [], "level": [], "ahead": [], "n/a": []}
            for reg in regimes:
                for axis in AXES:
                    p = pidx.get((reg, "none", ours, peer, axis, "bsf_100"))
                    if p is not None:  # nobody is charged without references: a verdict or n/a
                        got[p["verdict"]].append((reg, "none", axis, False))
            n = sum(len(v) for v in got.values())
            said = [
                f"{verdict} in {len(got[verdict])} ({_cells_text(got[verdict], regimes, ['none'])})"
                for verdict in ("behind", "level")
                if got[verdict]
            ]
            if not said:
                said = ["behind or level in none"]
            rest = f"ahead in {len(got['ahead'])}" + (f", too few seeds in {len(got['n/a'])}" if got["n/a"] else "")
            lines.append(f"- {ours} against **{peer}**, of {n} (regime, axis) cells: {'; '.join(said)}; {rest}.")
        lines.append("")
    lines += ["## Caveats", "", *(f"- {c}" for c in _CAVEATS), ""]
    return lines


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
        f"{_learner_line()} Ran in {result.seconds:.0f} s.",
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
        "symbols per cell: per step, per rollout, per wall-clock. `paired.csv` has the numbers, TTB included. "
        f"{_UNREACHED_OURS} / {_UNREACHED_ROW}: ours / the row has no score within Random's budget on that axis "
        "(a reference charge beyond it, information 'charged') while the other has one.",
        "",
    ]
    lines += where_bots_loses(result)
    for info in cfg.information:
        lines += [f"## Information: {info}", "", _INFO_TITLES[info] + ".", ""]
        if info == CHARGED:
            charged = [e.label for e in cfg.entrants if e.charged(info)]
            lines += [
                f"Charged here: {', '.join(charged) or 'no row'} (the rows whose run read the references). Each "
                "starts its rollout axis at the rollouts measuring the two references costs (2 references × tasks × "
                "ref_rollouts) and its wall-clock axis at their generation cost (in calls of batch × n rollouts: "
                f"{ROUND_LATENCY:g} per call plus {GENERATION:g} per batch × n rollouts); the per-step axis and every "
                "other row are as under 'paper'. A row whose charge exceeds Random's whole budget on an axis has no "
                "score within it (BSF `-`) and its TTB there exceeds its charge ÷ Random's (TTB counts the steps "
                "the row takes to reach Random's best within its own run, as for every row; `-` if it never does).",
                "",
                *_charge_lines(cfg.regimes),
                "",
            ]
        for ours in OURS:
            lines += [f"### Verdicts: {ours} against each row (step / rollout / wall-clock, BSF 100%)", ""]
            lines += ["| Row | " + " | ".join(regimes) + " |", "|---|" + "---|" * len(regimes)]
            for e in cfg.entrants:
                cells = []
                for reg in regimes:
                    marks = [
                        _mark(
                            pidx.get((reg, info, ours, e.label, axis, "bsf_100")),
                            idx.get((reg, info, ours, axis, "bsf_100")),
                            idx.get((reg, info, e.label, axis, "bsf_100")),
                        )
                        for axis in AXES
                    ]
                    cells.append(" ".join(m for m in marks if m))
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
                elif row is not None:
                    ax.text(j, i, "-", ha="center", va="center", fontsize=7)  # not reached within the budget
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


def write_scoreboard(
    result: ScoreboardResult, out: Path, command: str | None = None, *, plots: bool = True
) -> list[Path]:
    """Every file of the run under ``out`` (created); the paths written. ``plots=False``: no heat
    maps (``bots scoreboard --no-plots``, which runs without matplotlib)."""
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
    for info in result.config.information if plots else ():
        path = out / f"scoreboard_{info}.png"
        _heatmap(result, info, path)
        written.append(path)
    return written
