"""The files ``bots simulate`` writes: summary.md, tables.csv, headline_seeds.csv (the methods
table seed by seed), curves.csv, heatmap_*.csv, evidence.csv, results.json and the PNG plots."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from ..metrics import mean_ci, rollout_axis
from ..simulate.experiment import ExperimentResult
from .simulation import evidence_rows, group_rows, heatmap_of, interval_rows, slug, summary_markdown
from .simulation_plots import write_plots

__all__ = ["write_outputs"]


def _labels_by_key(result: ExperimentResult) -> dict[str, str]:
    out: dict[str, str] = {}
    for rows_spec in result.groups.values():
        for label, spec in rows_spec:
            out.setdefault(spec.key, label)
    return out


def write_outputs(
    result: ExperimentResult, out_dir: Path, command: str | None = None, plots: bool = True
) -> list[Path]:
    """Write summary.md, tables.csv, curves.csv, heatmap_*.csv, evidence.csv, results.json and
    (with ``plots``) the PNGs into ``out_dir``; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    n = result.config.learner.n_rollouts

    summary = out_dir / "summary.md"
    summary.write_text(summary_markdown(result, command), encoding="utf-8")
    written.append(summary)

    tables = {g: [r.to_dict() for r in group_rows(result, g)] for g in result.groups}
    path = out_dir / "tables.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        fields = ["group"] + list(next(iter(tables.values()))[0].keys())
        wr = csv.DictWriter(fh, fieldnames=fields)
        wr.writeheader()
        for g, rows in tables.items():
            for row in rows:
                wr.writerow({"group": g, **{k: ("-" if v is None else v) for k, v in row.items()}})
    written.append(path)

    if "methods" in result.groups:
        # The methods table seed by seed (TTB/BSF per step and per rollout), for intervals.
        path = out_dir / "headline_seeds.csv"
        with path.open("w", newline="", encoding="utf-8") as fh:
            wr_seed = csv.writer(fh)
            rows_ci = interval_rows(result, "methods")
            names = list(rows_ci[0].values)
            wr_seed.writerow(["method", "key", "seed", *names])
            for r in rows_ci:
                for i, seed in enumerate(result.config.seeds):
                    cells = [r.values[name][i] for name in names]
                    wr_seed.writerow([r.label, r.key, seed, *("-" if v is None else v for v in cells)])
        written.append(path)

    labels = _labels_by_key(result)
    path = out_dir / "curves.csv"
    with path.open("w", newline="", encoding="utf-8") as fh:
        wr_rows = [row for (key, _), rec in result.runs.items() for row in rec.to_rows(labels[key])]
        wr = csv.DictWriter(fh, fieldnames=list(wr_rows[0].keys()))
        wr.writeheader()
        wr.writerows(wr_rows)
    written.append(path)

    for label, spec in result.groups.get("methods", []):
        heat = heatmap_of(result, spec)
        path = out_dir / f"heatmap_{slug(label)}.csv"
        with path.open("w", newline="", encoding="utf-8") as fh:
            wr2 = csv.writer(fh)
            wr2.writerow(["step"] + [f"{k}/{n}" for k in range(n + 1)])
            for t, row in enumerate(heat):
                wr2.writerow([t + 1] + [f"{v:.5f}" for v in row])
        written.append(path)

    ev = evidence_rows(result)
    if ev:
        path = out_dir / "evidence.csv"
        with path.open("w", newline="", encoding="utf-8") as fh:
            wr3 = csv.DictWriter(fh, fieldnames=list(ev[0].keys()))
            wr3.writeheader()
            wr3.writerows(ev)
        written.append(path)

    curves: dict[str, Any] = {}
    for key, label in labels.items():
        recs = [result.runs[(key, s)] for s in result.config.seeds]
        entry: dict[str, Any] = {"label": label}
        for attr in ("perf", "etr", "strict_valid", "below_one", "above_zero"):
            mean, half = mean_ci([getattr(r, attr) for r in recs])
            entry[attr] = {"mean": np.round(mean, 5).tolist(), "ci95": np.round(half, 5).tolist()}
        # The x-axis of the per-rollout TTB/BSF: rollouts spent before each point of "perf".
        entry["rollouts_spent"] = np.round(np.mean([rollout_axis(r.rollouts) for r in recs], axis=0), 2).tolist()
        curves[key] = entry
    path = out_dir / "results.json"
    payload = {
        "command": command,
        "config": result.config.to_dict(),
        "wall_seconds": round(result.seconds, 2),
        "tables": tables,
        "evidence": ev,
        "curves": curves,
    }
    path.write_text(json.dumps(_clean(payload), indent=1, allow_nan=False), encoding="utf-8")
    written.append(path)

    if plots:
        written += write_plots(result, out_dir)
    return written


def _clean(o: Any) -> Any:
    """JSON-safe copy: NaN becomes null, numpy scalars and tuples become plain values."""
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, (float, np.floating)):
        return None if math.isnan(float(o)) else float(o)
    return o
