"""bench.json, bench.md and bench.png from the harness's results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# The project's targets for one step (update + select) on its 2-core machines, in ms.
STEP_TARGET_MS = {54_400: 0.3, 1_000_000: 4.0, 10_000_000: 40.0}
OPS = ("update", "select", "step")
# Goals for what the trainer waits for with the background pass: select() called after the
# optimiser step (median, at 10M tasks), and take(k) (median, every size).
SELECT_WAIT_GOAL_MS = 0.1
SELECT_WAIT_GOAL_N = 10_000_000
TAKE_GOAL_MS = 0.05
STAGES = ("update", "draw", "output_faults", "greedy_select", "thompson_select", "select_minus_draw")
README_START = "<!-- bench-summary:start"
README_END = "<!-- bench-summary:end -->"

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


def write_json(path: Path, meta: dict[str, Any], results: list[Result], *, stages: list[Result] = (),  # type: ignore[assignment]
               critical_path: list[Result] = ()) -> None:  # type: ignore[assignment]  # fmt: skip
    data = {"meta": meta, "results": results, "stages": list(stages), "critical_path": list(critical_path)}
    path.write_text(json.dumps(data, indent=1) + "\n")


def simd_line(meta: dict[str, Any]) -> str:
    chosen = meta.get("simd_backend", "not recorded")
    avail = meta.get("simd_available") or []
    return f"{chosen}" + (f" (this CPU can run: {', '.join(avail)})" if avail else "")


def step_floor_ms(meta: dict[str, Any], n: int, threads: int) -> float | None:
    bw = {int(t): v for t, v in meta["copy_bandwidth_bytes_per_s"].items()}
    return floor_ms(n, meta["fused_step_bytes_per_task"], bw[threads]) if threads in bw else None


def write_markdown(path: Path, meta: dict[str, Any], results: list[Result], *, stages: list[Result] = (),  # type: ignore[assignment]
                   critical_path: list[Result] = ()) -> None:  # type: ignore[assignment]  # fmt: skip
    sizes: list[int] = meta["sizes"]
    bw = {int(t): v for t, v in meta["copy_bandwidth_bytes_per_s"].items()}
    v, prm = meta["versions"], meta["params"]
    la0, la1 = meta["load_avg_start"], meta["load_avg_end"]
    lines = [
        "# bots-rft benchmark" + (" (quick smoke run: not representative)" if meta["quick"] else ""),
        "",
        f"- Date: {meta['date']}; wall time {meta['wall_s']:.0f} s",
        f"- CPU: {meta['cpu']}, {meta['cores']} cores; {meta['platform']}",
        f"- SIMD path of the kernels: {simd_line(meta)}",
        f"- Versions: bots-rft {v['bots-rft']}, numpy {v['numpy']}, torch {v['torch']}, Python {meta['python']}",
        f"- Setting: B={prm['batch']}, n={prm['n_rollouts']}, λ={prm['lam']}, ρ={prm['rho']}, interpolation evidence, "
        f"Thompson sampling; torch draws Beta by `{'_standard_gamma ratio' if prm['torch_sampler'] == 'gamma' else 'distributions.Beta.sample'}`",
        "- Copy bandwidth (np.copyto, bytes read + written, best of 10): "
        + ", ".join(f"{t} thread{'s' if t > 1 else ''} {b / 1e9:.1f} GB/s" for t, b in sorted(bw.items())),
        f"- Load average (1 min) at start {la0[0]:.2f}, at end {la1[0]:.2f}: other processes on these cores inflate "
        "the timings, the 2-thread ones most."
        + (
            " **The machine was busy during this run: treat the timings as upper bounds.**"
            if max(la0[0], la1[0]) > meta["cores"]
            else ""
        ),
    ]
    if sizes:
        lines += step_sections(meta, results)
    if stages:
        lines += stage_section(stages)
    if critical_path:
        lines += critical_path_section(critical_path)
    lines.append("")
    path.write_text("\n".join(lines))


def step_sections(meta: dict[str, Any], results: list[Result]) -> list[str]:
    """Timings, speed-ups, memory and the streaming floor of the step jobs."""
    sizes: list[int] = meta["sizes"]
    bw = {int(t): v for t, v in meta["copy_bandwidth_bytes_per_s"].items()}
    bw_fp = {int(n): {int(t): v for t, v in d.items()} for n, d in meta["footprint_copy_bandwidth_bytes_per_s"].items()}
    per_task = meta["fused_step_bytes_per_task"]
    lines = [
        "",
        "## Timings (median ms)",
        "",
        "update = `update(); flush()`; select = `select(B)` with nothing pending; step = `update(); select(B)` "
        "(ids from the previous select, successes ~ Binomial(16, p)). Medians over the timed runs after warm-up. "
        "bots-rft runs with `prefetch=False` here, so the caller waits for every pass; the critical-path section "
        "measures the default, `prefetch=True`.",
        "",
        "step ÷ floor: the step's median over the memory-streaming floor at the same thread count (last section). "
        "numpy ÷ this: numpy's step median over this row's (the speed-up over the authors' style). "
        "cold step: the same step right after a sweep over more memory than the last-level cache holds "
        "(`cold_sweep_bytes` in bench.json), as when a trainer's own work runs between two steps; its numpy ÷ this "
        "compares the two cold steps.",
        "",
        "| N | implementation | threads | update | select | step | step ÷ floor | numpy ÷ this | step ÷ bots-rft (same threads) "
        "| cold step | numpy ÷ this, cold | timed runs |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        numpy = _find(results, "numpy", n, 1)
        for r in sorted(_ok(results), key=lambda r: (r["impl"] != "bots-rft", r["impl"], r["threads"])):
            if r["num_tasks"] != n:
                continue
            m = r["median_ms"]
            bots = _find(results, "bots-rft", n, r["threads"])
            ratio = "" if r["impl"] == "bots-rft" else _ratio(m["step"], bots["median_ms"]["step"] if bots else None)
            vs_numpy = "" if r["impl"] == "numpy" else _ratio(numpy["median_ms"]["step"] if numpy else None, m["step"])
            vs_floor = _ratio(m["step"], step_floor_ms(meta, n, r["threads"]))
            cold = m.get("step_cold")
            numpy_cold = numpy["median_ms"].get("step_cold") if numpy else None
            vs_numpy_cold = "" if r["impl"] == "numpy" else _ratio(numpy_cold, cold)
            runs = "/".join(str(len(r["times_ms"][op])) for op in (*OPS, "step_cold") if op in r["times_ms"])
            lines.append(
                f"| {n:,} | {r['impl']} | {r['threads']} | {_ms(m['update'])} | {_ms(m['select'])} | **{_ms(m['step'])}** "
                f"| {vs_floor} | {vs_numpy} | {ratio} | {_ms(cold)} | {vs_numpy_cold} | {runs} |"
            )
    errors = [r for r in results if "error" in r]
    for r in errors:
        lines.append(f"| {r['num_tasks']:,} | {r['impl']} | {r['threads']} | failed: {r['error']} | | | | | | | | |")

    lines += [
        "",
        "## Speed-up of bots-rft (baseline time ÷ bots-rft time)",
        "",
        "| N | comparison | update | select | step |",
        "|---:|---|---:|---:|---:|",
    ]
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
    return lines


def _ns(x: float) -> str:
    return f"{x:.2f}" if abs(x) < 10 else f"{x:.1f}"


def stage_section(stages: list[Result]) -> list[str]:
    """Per-stage ns per task on one core, one row per pool size and SIMD path."""
    lines = [
        "",
        "## Per-stage cost on one core (ns per task)",
        "",
        "Each stage of a step called on its own through the compiled core with threads=1 (benches/stages.py, calls "
        "in benches/core_calls.py), on a posterior a few updates in; median time ÷ N. update: the O(N) posterior "
        "pass of one batch with interpolation evidence (`_core.Posterior.step` with an `UpdateSpec`, no `SelectSpec`). draw: one Thompson draw per task "
        "(`_core.thompson_draws`; it also checks every shape and writes N float32 draws to a new array, whose page "
        "faults, timed alone on a new numpy array, are the 'new-array faults' column). greedy "
        "top-B: `_core.select` with `SelectSpec(thompson=False)`, no sampling. Thompson select: draw and top-B fused "
        "(`SelectSpec(thompson=True)`), what `select()` runs. select − draw = Thompson select − (draw − new-array "
        "faults): an estimate of what top-B adds to the sampling, small, and negative when the draw's own shape "
        "checks cost more. One step on one core ≈ update + Thompson select; (auto) marks the path the core "
        "picks on this CPU.",
        "",
        "| N | SIMD path | update | draw | new-array faults | greedy top-B | Thompson select | select − draw "
        "| update + select, ms (1 core) | timed runs |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for st in stages:
        n = st["num_tasks"]
        if "error" in st:
            lines.append(f"| {n:,} | failed: {st['error']} | | | | | | | | |")
            continue
        for name, b in st["backends"].items():
            ns = b["ns_per_task"]
            label = f"{name} (auto)" if name == st["auto_backend"] else name
            step_ms = b["median_ms"]["update"] + b["median_ms"]["thompson_select"]
            runs = "/".join(str(b["timed_runs"][k]) for k in ("update", "draw", "greedy_select", "thompson_select"))
            cells = " | ".join(_ns(ns[k]) if k in ns else "—" for k in STAGES)
            lines.append(f"| {n:,} | {label} | {cells} | {_ms(step_ms)} | {runs} |")
    return lines


def _met(value: float, goal: float) -> str:
    return "yes" if value < goal else "**no**"


def critical_path_section(critical: list[Result]) -> list[str]:
    """select() wait after a pause, prefetch on and off; update() on the caller; take(k)."""
    ok = [c for c in critical if "error" not in c and "skipped" not in c]
    pause = ok[0]["pause_s"] if ok else (critical[0].get("pause_s", 0.2) if critical else 0.2)
    lines = [
        "",
        "## What the trainer waits for (critical path)",
        "",
        f"A trainer's loop (benches/critical_path.py): `update()`, then {pause * 1e3:.0f} ms of other work (its "
        "optimiser step, a sleep here), then `select(B)`. prefetch on: the fused update + next-selection pass starts "
        "in the background when `update()` returns, so `select()` only picks up its result; prefetch off: `select()` "
        "runs the pass. Times on the caller's thread, median / 90th percentile / maximum over the timed steps; "
        "'same selections': both modes chose identical tasks at every step. 'trivial call after the pause': a "
        "256-element numpy add timed right after a second sleep of the same length in each step of the prefetch "
        "loop, what any first call costs on this machine once the thread has slept (the floor under the wait, "
        "measured in the same phase of the host); 'wait ÷ trivial': the ratio of the two medians. Goal: median "
        "`select()` wait "
        f"< {SELECT_WAIT_GOAL_MS} ms at {SELECT_WAIT_GOAL_N:,} tasks with prefetch. 'back to back': "
        "`update(); select()` with no pause between steps (a caller that does other work elsewhere or none), "
        "median and p90 of the pair, the two modes alternating twice; with prefetch `select()` waits for the pass "
        "`update()` has just started, which should cost no more than running it in `select()`.",
        "",
        "| N | threads | prefetch | select() wait median | p90 | max | update() median | update() p90 | same selections "
        "| trivial call after the pause | wait ÷ trivial | goal met | back to back, median | p90 |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---|---:|---:|",
    ]
    for c in ok:
        n = c["num_tasks"]
        for mode in ("prefetch", "sync"):
            r = c["modes"][mode]
            w, u = r["select_wait_ms"], r["update_ms"]
            goal = _met(w["median"], SELECT_WAIT_GOAL_MS) if mode == "prefetch" and n == SELECT_WAIT_GOAL_N else ""
            same = "yes" if c["identical_selections"] else "**no**"
            wake = _ms(c["wake_ms"]["median"]) if "wake_ms" in c and mode == "prefetch" else ""
            ratio = f"{w['median'] / c['wake_ms']['median']:.1f}×" if wake and c["wake_ms"]["median"] > 0 else ""
            b2b = r.get("back_to_back", {}).get("step_ms", {})
            lines.append(
                f"| {n:,} | {c['threads']} | {'on' if mode == 'prefetch' else 'off'} | **{_ms(w['median'])}** | {_ms(w['p90'])} "
                f"| {_ms(w['max'])} | {_ms(u['median'])} | {_ms(u['p90'])} | {same} | {wake} | {ratio} | {goal} "
                f"| {_ms(b2b.get('median'))} | {_ms(b2b.get('p90'))} |"
            )
    if len(ok) < len(critical):
        lines.append("")
    lines += [f"- {c['num_tasks']:,} tasks: failed: {c['error']}" for c in critical if "error" in c]
    lines += [f"- {c['num_tasks']:,} tasks: skipped: {c['skipped']}" for c in critical if "skipped" in c]
    takes = [(c, t) for c in ok for t in c.get("take", [])]
    if takes:
        lines += [
            "",
            "### Streaming: take(k)",
            "",
            "`take(k)` hands out the next k tasks of the current Thompson draw; the next draw is prepared in the "
            "background when the current one has half its tasks left. Loop: `take(k, draw_size)`, then a pause of "
            "k/B of the batch loop's pause (tasks go out at the batch loop's pace, B per pause: a rollout worker's "
            "turn); once a group of taken tasks has results, one `update()` returns them (an asynchronous trainer's "
            "group). Six draws' worth of tasks per row. Median / p90 / maximum over every call after warm-up. "
            "Back to back: the same calls with no pause, so caches stay warm: the calls' own cost, without the "
            f"wake-up a paused thread pays (see the trivial call above). Goal: median take() < {TAKE_GOAL_MS} ms.",
            "",
            "| N | threads | k | draw size | pause between calls, ms | take() median | p90 | max | back to back, median "
            "| take() calls | group | update() median | update() p90 | goal met |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for c, t in takes:
            tk, u = t["take_ms"], t["update_ms"] or {}
            interval = _ms(t["interval_s"] * 1e3) if "interval_s" in t else "—"
            lines.append(
                f"| {c['num_tasks']:,} | {c['threads']} | {t['k']} | {t['draw_size']} | {interval} | **{_ms(tk['median'])}** "
                f"| {_ms(tk['p90'])} | {_ms(tk['max'])} | {_ms(t.get('back_to_back_take_ms', {}).get('median'))} "
                f"| {tk['runs']} | {t['evidence_batch']} | {_ms(u.get('median'))} "
                f"| {_ms(u.get('p90'))} | {_met(tk['median'], TAKE_GOAL_MS)} |"
            )
    return lines


README_HEADER = (
    "| run | pool size | bots-rft step, 1 thread | 2 threads | numpy (numpy ÷ bots-rft, 2 threads) "
    "| cold caches: bots-rft, 2 threads (numpy ÷ bots-rft) "
    "| torch, best of 1/2 threads | step ÷ floor (2 threads) | target | select() wait after the optimiser step, "
    "prefetch on / off | update() with prefetch | update(); select() back to back, prefetch on / off |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def readme_summary(meta: dict[str, Any], results: list[Result], critical: list[Result]) -> str:
    """The README's run summary: per pool size the step medians with their ratios and what
    select() waits with prefetch, all from this one run, labelled with its date, CPU and SIMD path."""
    bw = {int(t): v for t, v in meta["copy_bandwidth_bytes_per_s"].items()}
    crit = {c["num_tasks"]: c for c in critical if "modes" in c}
    when = meta["date"][:16].replace("T", " ") + " UTC"
    run = f"{when}, {meta['cpu']} ({meta['cores']} cores), {meta.get('simd_backend', 'SIMD path not recorded')}"
    lines = [README_HEADER]
    for i, n in enumerate(meta["sizes"]):
        b1, b2, npy = _find(results, "bots-rft", n, 1), _find(results, "bots-rft", n, 2), _find(results, "numpy", n, 1)
        torch = [r["median_ms"]["step"] for r in _ok(results) if r["impl"] == "torch" and r["num_tasks"] == n]
        s1 = b1["median_ms"]["step"] if b1 else None
        s2 = b2["median_ms"]["step"] if b2 else None
        np_step = npy["median_ms"]["step"] if npy else None
        numpy_cell = f"{_ms(np_step)} ms ({_ratio(np_step, s2)})" if np_step is not None else "—"
        c2 = b2["median_ms"].get("step_cold") if b2 else None
        np_cold = npy["median_ms"].get("step_cold") if npy else None
        cold_cell = f"{_ms(c2)} ms ({_ratio(np_cold, c2)})" if c2 is not None else "—"
        floor = floor_ms(n, meta["fused_step_bytes_per_task"], bw[2]) if 2 in bw else None
        c = crit.get(n)
        if c:
            on, off = c["modes"]["prefetch"], c["modes"]["sync"]
            wait = f"{_ms(on['select_wait_ms']['median'])} / {_ms(off['select_wait_ms']['median'])} ms"
            upd = f"{_ms(on['update_ms']['median'])} ms"
            if "back_to_back" in on and "back_to_back" in off:
                pair = on["back_to_back"]["step_ms"]["median"], off["back_to_back"]["step_ms"]["median"]
                b2b = f"{_ms(pair[0])} / {_ms(pair[1])} ms"
            else:
                b2b = "—"
        else:
            wait = upd = b2b = "—"
        target = f"{_ms(STEP_TARGET_MS[n])} ms" if n in STEP_TARGET_MS else "—"
        lines.append(
            f"| {run if i == 0 else ''} | {n:,} | {_ms(s1)} ms | **{_ms(s2)} ms** | {numpy_cell} | {cold_cell} "
            f"| {_ms(min(torch)) + ' ms' if torch else '—'} | {_ratio(s2, floor)} | {target} | {wait} | {upd} | {b2b} |"
        )
    lines += [
        "",
        "Copy bandwidth "
        + ", ".join(f"{b / 1e9:.1f} GB/s with {t} thread{'s' if t > 1 else ''}" for t, b in sorted(bw.items()))
        + f"; load average {meta['load_avg_start'][0]:.2f} at the start of the run, {meta['load_avg_end'][0]:.2f} at "
        "its end. Medians; select() is called 0.2 s after update(), 2 threads."
        + (
            " Cold caches: each step timed right after a sweep over more memory than the last-level cache holds, "
            "numpy's step likewise."
            if any("step_cold" in r["median_ms"] for r in _ok(results))
            else ""
        ),
    ]
    return "\n".join(lines)


def replace_readme_summary(path: Path, summary: str) -> None:
    """Put ``summary`` between the README's start and end markers (the markers stay)."""
    text = path.read_text()
    start, end = text.find(README_START), text.find(README_END)
    if start < 0 or end < start:
        raise ValueError(f"{path} has no {README_START} ... {README_END} markers")
    start_line_end = text.index("\n", start) + 1
    path.write_text(text[:start_line_end] + summary + "\n" + text[end:])


def write_plot(path: Path, meta: dict[str, Any], results: list[Result]) -> bool:
    """The step-time plot; False (and no file written) when the run has no step results."""
    if not _ok(results):
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes: list[int] = meta["sizes"]
    fig, ax = plt.subplots(figsize=(7.5, 5.0))
    series = sorted({(r["impl"], r["threads"]) for r in _ok(results)}, key=lambda k: (k[0] != "bots-rft", k))
    colors = {"bots-rft": "tab:blue", "numpy": "tab:orange", "torch": "tab:red"}
    for impl, t in series:
        pts = sorted(
            (r["num_tasks"], r["median_ms"]["step"]) for r in _ok(results) if r["impl"] == impl and r["threads"] == t
        )
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            marker="o",
            color=colors.get(impl),
            linestyle="-" if t == 1 else "-.",
            label=f"{impl}, {t} thread{'s' if t > 1 else ''}",
        )
    xs = sorted(sizes)
    for t, b in sorted((int(t), b) for t, b in meta["copy_bandwidth_bytes_per_s"].items()):
        ax.plot(
            xs,
            [floor_ms(n, meta["fused_step_bytes_per_task"], b) for n in xs],
            "k--",
            alpha=0.4 + 0.3 * (t > 1),
            label=f"streaming floor, {t} thread{'s' if t > 1 else ''} ({b / 1e9:.0f} GB/s)",
        )
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
    return True
