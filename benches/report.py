"""bench.json, bench.md and bench.png from the harness's results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# The project's targets for one step (update + select) on its 2-core machines, in ms.
STEP_TARGET_MS = {54_400: 0.3, 1_000_000: 4.0, 10_000_000: 40.0}
OPS = ("update", "select", "step")

Result = dict[str, Any]


def _ok(results: list[Result]) -> list[Result]:
    return [r for r in results if "error" not in r]


def _find(results: list[Result], impl: str, n: int, threads: int) -> Result | None:
    for r in _ok(results):
        if r["impl"] == impl and r["num_tasks"] == n and r["threads"] == threads:
            return r
    return None


def _ms(x: float | None) -> str:
    if x is None:
        return "—"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def _ratio(a: float | None, b: float | None) -> str:
    return "—" if a is None or b is None or b <= 0 else f"{a / b:.1f}×"


def floor_ms(n: int, bytes_per_task: int, bandwidth: float) -> float:
    return bytes_per_task * n / bandwidth * 1e3


def ratio_rows(results: list[Result], n: int) -> list[tuple[str, Result, Result]]:
    """(label, baseline, bots-rft) pairs compared at one pool size."""
    pairs = []
    for impl, t_base, t_bots in (("numpy", 1, 1), ("numpy", 1, 2), ("torch", 1, 1), ("torch", 2, 2)):
        base, bots = _find(results, impl, n, t_base), _find(results, "bots-rft", n, t_bots)
        if base and bots:
            pairs.append((f"{impl} ({t_base}t) ÷ bots-rft ({t_bots}t)", base, bots))
    return pairs


def write_json(path: Path, meta: dict[str, Any], results: list[Result]) -> None:
    path.write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")


def write_markdown(path: Path, meta: dict[str, Any], results: list[Result]) -> None:
    sizes: list[int] = meta["sizes"]
    bw = {int(t): v for t, v in meta["copy_bandwidth_bytes_per_s"].items()}
    bw_fp = {int(n): {int(t): v for t, v in d.items()} for n, d in meta["footprint_copy_bandwidth_bytes_per_s"].items()}
    per_task = meta["fused_step_bytes_per_task"]
    v, prm = meta["versions"], meta["params"]
    la0, la1 = meta["load_avg_start"], meta["load_avg_end"]
    lines = [
        "# bots-rft benchmark" + (" (quick smoke run: not representative)" if meta["quick"] else ""),
        "",
        f"- Date: {meta['date']}; wall time {meta['wall_s']:.0f} s",
        f"- CPU: {meta['cpu']}, {meta['cores']} cores; {meta['platform']}",
        f"- Versions: bots-rft {v['bots-rft']}, numpy {v['numpy']}, torch {v['torch']}, Python {meta['python']}",
        f"- Setting: B={prm['batch']}, n={prm['n_rollouts']}, λ={prm['lam']}, ρ={prm['rho']}, interpolation evidence, "
        f"Thompson sampling; torch draws Beta by `{'_standard_gamma ratio' if prm['torch_sampler'] == 'gamma' else 'distributions.Beta.sample'}`",
        "- Copy bandwidth (np.copyto, bytes read + written, best of 10): "
        + ", ".join(f"{t} thread{'s' if t > 1 else ''} {b / 1e9:.1f} GB/s" for t, b in sorted(bw.items())),
        f"- Load average (1 min) at start {la0[0]:.2f}, at end {la1[0]:.2f}: other processes on these cores inflate "
        "the timings, the 2-thread ones most."
        + (" **The machine was busy during this run: treat the timings as upper bounds.**"
           if max(la0[0], la1[0]) > meta["cores"] else ""),
        "- update = `update(); flush()`; select = `select(B)` with nothing pending; step = `update(); select(B)` "
        "(ids from the previous select, successes ~ Binomial(16, p)). Medians in ms over the timed runs after warm-up.",
        "",
        "## Timings (median ms)",
        "",
        "| N | implementation | threads | update | select | step | step ÷ bots-rft (same threads) | timed runs |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        for r in sorted(_ok(results), key=lambda r: (r["impl"] != "bots-rft", r["impl"], r["threads"])):
            if r["num_tasks"] != n:
                continue
            m = r["median_ms"]
            bots = _find(results, "bots-rft", n, r["threads"])
            ratio = "" if r["impl"] == "bots-rft" else _ratio(m["step"], bots["median_ms"]["step"] if bots else None)
            runs = "/".join(str(len(r["times_ms"][op])) for op in OPS)
            lines.append(
                f"| {n:,} | {r['impl']} | {r['threads']} | {_ms(m['update'])} | {_ms(m['select'])} | {_ms(m['step'])} "
                f"| {ratio} | {runs} |"
            )
    errors = [r for r in results if "error" in r]
    for r in errors:
        lines.append(f"| {r['num_tasks']:,} | {r['impl']} | {r['threads']} | failed: {r['error']} | | | | |")

    lines += ["", "## Speed-up of bots-rft (baseline time ÷ bots-rft time)", "",
              "| N | comparison | update | select | step |", "|---:|---|---:|---:|---:|"]
    for n in sizes:
        for label, base, bots in ratio_rows(results, n):
            cells = " | ".join(_ratio(base["median_ms"][op], bots["median_ms"][op]) for op in OPS)
            lines.append(f"| {n:,} | {label} | {cells} |")

    lines += [
        "",
        "## Memory per task",
        "",
        "State: bytes of the arrays the implementation holds per task (α, β, the two references, as stored). "
        "Peak / resident: RSS above a baseline taken after imports, a tiny warm-up and the creation of the "
        "user's own reference arrays (float64), so a copy of the references counts, the caller's originals do not: "
        "numpy and torch use the caller's arrays in place (resident = α, β), bots-rft keeps its own float32 copy. "
        "Peak minus resident = the largest pool-sized temporaries of a step. Below ~10^5 tasks page and allocator "
        "granularity dominate these numbers.",
        "",
        "| N | implementation | threads | state B/task | peak RSS B/task | resident after B/task |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for n in sizes:
        for r in sorted(_ok(results), key=lambda r: (r["impl"] != "bots-rft", r["impl"], r["threads"])):
            if r["num_tasks"] == n:
                lines.append(
                    f"| {n:,} | {r['impl']} | {r['threads']} | {r['state_bytes_per_task']:.1f} "
                    f"| {r['peak_bytes_per_task']:.1f} | {r['steady_bytes_per_task']:.1f} |"
                )

    threads = sorted(bw)
    head = " | ".join(f"floor {t}t | bots-rft step {t}t | ÷ floor" for t in threads)
    lines += [
        "",
        "## Memory-streaming floor of the fused step",
        "",
        f"bots-rft's fused update+select must read α, β (2×8 B), read the references as float32 (2×4 B) and "
        f"write α, β (2×8 B): {per_task} B per task. Floor = {per_task} B × N ÷ copy bandwidth (the large copy "
        "above, per thread count). 'In-cache floor' uses the bandwidth of a copy with the step's own footprint "
        f"({per_task} B × N), which is higher while that fits in cache. target: update + select on this class "
        "of machine.",
        "",
        f"| N | MB streamed | in-cache floor | {head} | target | met (best threads) |",
        "|---:|---:|---:|" + "---:|---:|---:|" * len(threads) + "---:|---:|",
    ]
    for n in sizes:
        row: list[str] = []
        best: float | None = None
        for t in threads:
            f = floor_ms(n, per_task, bw[t])
            bots = _find(results, "bots-rft", n, t)
            step = bots["median_ms"]["step"] if bots else None
            if step is not None:
                best = step if best is None else min(best, step)
            row.append(f"{_ms(f)} | {_ms(step)} | {_ratio(step, f)}")
        fp = bw_fp.get(n, {})
        in_cache = floor_ms(n, per_task, max(fp.values())) if fp else None
        target = STEP_TARGET_MS.get(n)
        met = "—" if target is None or best is None else ("yes" if best <= target else "no")
        lines.append(
            f"| {n:,} | {per_task * n / 1e6:.1f} | {_ms(in_cache)} | {' | '.join(row)} | {_ms(target)} | {met} |"
        )
    lines.append("")
    path.write_text("\n".join(lines))


def write_plot(path: Path, meta: dict[str, Any], results: list[Result]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes: list[int] = meta["sizes"]
    fig, ax = plt.subplots(figsize=(7.5, 5.0))
    series = sorted({(r["impl"], r["threads"]) for r in _ok(results)}, key=lambda k: (k[0] != "bots-rft", k))
    colors = {"bots-rft": "tab:blue", "numpy": "tab:orange", "torch": "tab:red"}
    for impl, t in series:
        pts = sorted((r["num_tasks"], r["median_ms"]["step"]) for r in _ok(results) if r["impl"] == impl and r["threads"] == t)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", color=colors.get(impl),
                linestyle="-" if t == 1 else "-.", label=f"{impl}, {t} thread{'s' if t > 1 else ''}")
    xs = sorted(sizes)
    for t, b in sorted((int(t), b) for t, b in meta["copy_bandwidth_bytes_per_s"].items()):
        ax.plot(xs, [floor_ms(n, meta["fused_step_bytes_per_task"], b) for n in xs], "k--", alpha=0.4 + 0.3 * (t > 1),
                label=f"streaming floor, {t} thread{'s' if t > 1 else ''} ({b / 1e9:.0f} GB/s)")
    tgt = [(n, STEP_TARGET_MS[n]) for n in xs if n in STEP_TARGET_MS]
    if tgt:
        ax.plot([p[0] for p in tgt], [p[1] for p in tgt], "kx", markersize=9, linestyle="none", label="target")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("pool size N (tasks)")
    ax.set_ylabel("step time, update + select (ms, median)")
    ax.set_title(f"BOTS step, B={meta['params']['batch']}, n={meta['params']['n_rollouts']}, {meta['cpu']}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
