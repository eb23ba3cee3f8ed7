"""Tables, CSV and plots of a simulator scenario (``bots simulate --scenario``)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from ..metrics import mean_ci
from ..simulate.scenarios import POOL_NAMES, ScenarioConfig, ScenarioRun

__all__ = ["scenario_table", "write_scenario"]


def _pm(values: list[float], digits: int = 3) -> str:
    mean, half = mean_ci(np.asarray(values)[:, None])
    return f"{mean[0]:.{digits}f} ± {half[0]:.{digits}f}"


def scenario_table(config: ScenarioConfig, runs: list[ScenarioRun]) -> str:
    """Markdown: per arm, mean ± 95% t-interval over seeds of the final held-out score, its gain
    over Random paired by seed, the mean ETR and (multipool) each task set's share of the batches."""
    by = {(r.arm, r.seed): r for r in runs}
    pools = config.scenario == "multipool"
    head = ["Arm", "final held-out score", "gain over Random (paired)", "ETR (mean over steps)"]
    if pools:
        head += [f"share {name}" for name in POOL_NAMES]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for arm in config.arms:
        rs = [by[(arm, s)] for s in config.seeds]
        cells = [
            arm,
            _pm([r.perf[-1] for r in rs]),
            _pm([r.perf[-1] - by[("Random", r.seed)].perf[-1] for r in rs]),
            _pm([float(np.nanmean(r.etr)) for r in rs]),
        ]
        if pools:
            cells += [_pm([float(r.shares[:, i].mean()) for r in rs], 2) for i in range(len(POOL_NAMES))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _plot(config: ScenarioConfig, runs: list[ScenarioRun], path: Path) -> Path:
    from .simulation_plots import _band, _colors, _plt

    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    steps = np.arange(config.steps + 1)
    for arm, color in zip(config.arms, _colors(len(config.arms))):
        rs = [r for r in runs if r.arm == arm]
        _band(axes[0], steps, [r.perf for r in rs], arm, color)
        _band(axes[1], steps[1:], [r.etr for r in rs], arm, color)
    axes[0].set(xlabel="step", ylabel="held-out score", title="held-out score (95% band over seeds)")
    axes[1].set(xlabel="step", ylabel="ETR", title="effective share of the batch", ylim=(0, 1))
    axes[0].legend(fontsize=8)
    title = {
        "multipool": f"three task sets mixed {'/'.join(f'{w:g}' for w in config.pool_weights)} "
        f"({'/'.join(POOL_NAMES)})",
        "graded": f"graded rewards: fraction of {config.checks} checks passed",
    }[config.scenario]
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_scenario(
    config: ScenarioConfig, runs: list[ScenarioRun], out: Path, command: str, plots: bool = True
) -> list[Path]:
    """summary.md (the table and the command), curves.csv (every step of every run) and, with
    ``plots``, scenario_<name>.png, under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    summary = out / "summary.md"
    summary.write_text(
        f"# bots simulate --scenario {config.scenario}\n\n`{command}`\n\n{scenario_table(config, runs)}\n",
        encoding="utf-8",
    )
    written.append(summary)
    curves = out / "curves.csv"
    with curves.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["arm", "seed", "step", "perf", "etr", *[f"share_{p}" for p in POOL_NAMES]])
        for r in runs:
            for t in range(config.steps + 1):
                last = t == config.steps
                shares = [""] * len(POOL_NAMES) if last or r.shares.shape[1] == 0 else list(r.shares[t])
                w.writerow([r.arm, r.seed, t, r.perf[t], "" if last else r.etr[t], *shares])
    written.append(curves)
    if plots:
        written.append(_plot(config, runs, out / f"scenario_{config.scenario}.png"))
    return written
