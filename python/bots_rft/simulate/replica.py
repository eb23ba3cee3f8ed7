"""A simulated replica of a real comparison: the simulated world matched to a real pool, and what
the simulated learner predicts for the real trial's paired metric.

- :func:`fit_replica` / :func:`replica_learner`: a :class:`~.learner.LearnerConfig` whose world,
  measured with ``n_rollouts`` samples per task as the real pool was, has the real starting
  policy's share of tasks at 0 and at 1 and the real weak / strong references' mean pass rates
  (a deterministic search over ``difficulty_mean``, ``difficulty_std``, ``weak_level`` and
  ``strong_level`` on the worlds :func:`~.learner.make_world` draws; :class:`ReplicaFit` states
  what it matched and what it did not).
- :func:`predict_paired`: every method on every seed, its primary metric (the mean held-out score
  over the evaluations at steps 0, eval_every, ..., steps, the pre-registered trial's), paired
  by seed against a baseline, in absolute units and in units of the baseline's own gain.
- :func:`fit_trajectory_noise`, :func:`fit_learning_rate`: the learner's per-step noise and step
  size matched to a real Random arm (its seed-to-seed spread over its gain; its gain over its
  start).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import ConfigError
from ..metrics import mean_ci, pearson
from .experiment import MethodSpec, SimConfig, run_method
from .fitted import NO_SATURATION_K
from .learner import LearnerConfig, make_world

__all__ = [
    "TRIAL_STRINGS_POOL",
    "ReplicaFit",
    "fit_replica",
    "fit_pool_replica",
    "CALIBRATION_LEARNER",
    "calibrated_learner",
    "replica_learner",
    "predict_paired",
    "fit_trajectory_noise",
    "fit_learning_rate",
    "SIGMA_GRID",
]

FloatArray = npt.NDArray[np.float64]

#: The real pool of configs/trial_strings_cpu.yaml (``reverse <word>``, 6,000 training and 600
#: held-out tasks), each pass rate measured with 8 samples per task: the starting policy's share
#: of tasks at 0 and at 1 (and its mean and the share between, for comparison), the weak and
#: strong references' mean pass rates, and the correlation of start and strong rates per task.
TRIAL_STRINGS_POOL: dict[str, Any] = {
    "start_shares": (0.358, 0.146),
    "start_mean": 0.428,
    "weak_mean": 0.002,
    "strong_mean": 0.766,
    "start_strong_pearson": 0.30,
    "num_tasks": 6000,
    "n_rollouts": 8,
    "eval_tasks": 600,
}

#: The trajectory-noise values :func:`fit_trajectory_noise` tries by default.
SIGMA_GRID: tuple[float, ...] = (0.0, 0.005, 0.01, 0.02, 0.04, 0.08)

#: The fields of LearnerConfig the replica fit sets (overrides may not name them).
_FITTED = ("difficulty_mean", "difficulty_std", "weak_level", "strong_level")


def _softplus(x: FloatArray) -> FloatArray:
    return np.asarray(np.logaddexp(0.0, x), dtype=np.float64)


def _at0(base: FloatArray, n: int) -> float:
    """Expected share of tasks with 0 of n successes, p = sigmoid(base): the mean of (1 - p)^n."""
    return float(np.exp(-n * _softplus(base)).mean())


def _shares(base: FloatArray, n: int) -> tuple[float, float]:
    """Expected share of tasks with 0 of n and with n of n successes, p = sigmoid(base):
    the means of (1 - p)^n and p^n."""
    at0 = _at0(base, n)
    at1 = float(np.exp(-n * _softplus(-base)).mean())
    return at0, at1


def _bisect(
    f: Any, lo: float, hi: float, target: float, increasing: bool, iters: int = 60, xtol: float = 1e-9
) -> float:
    """x in [lo, hi] with f(x) = target for a monotone f (the endpoint when it lies outside)."""
    sign = 1.0 if increasing else -1.0
    for _ in range(iters):
        if hi - lo <= xtol:
            break
        mid = 0.5 * (lo + hi)
        if sign * (f(mid) - target) < 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class ReplicaFit:
    """What :func:`fit_replica` matched: the learner, the targets, the achieved values (expected,
    over the fit worlds pooled), one measured draw, and the per-world spread."""

    learner: LearnerConfig
    #: at0, at1 (starting policy's share of tasks at 0 / at 1 of n_rollouts), weak_mean, strong_mean
    targets: dict[str, float]
    #: the same, expected values of the measurement over the fit worlds pooled (what was matched)
    achieved: dict[str, float]
    #: one measured draw (n_rollouts per task for the start; the world's own reference measurement
    #: with ref_rollouts), pooled: at0, at1, between, start_mean, weak_mean, strong_mean,
    #: start_strong_pearson (the mean over the worlds of the per-world correlation)
    measured: dict[str, float]
    #: per-world (min, max) of the expected at0, at1, start_mean, weak_mean, strong_mean
    spread: dict[str, tuple[float, float]]
    #: statistics given for comparison only (not fitted): name -> (real, simulated expected/measured)
    unmatched: dict[str, tuple[float, float]]
    fit_seeds: tuple[int, ...]
    tolerance: float
    seconds: float = 0.0

    @property
    def errors(self) -> dict[str, float]:
        return {k: self.achieved[k] - v for k, v in self.targets.items()}

    def describe(self) -> str:
        c = self.learner
        lines = [
            f"replica world ({c.num_tasks} tasks, {c.eval_tasks} held out, {c.n_rollouts} rollouts, "
            f"references from {c.ref_rollouts}; fitted on worlds {list(self.fit_seeds)} pooled, tolerance "
            f"±{self.tolerance:g}): difficulty_mean {c.difficulty_mean:.4f}, difficulty_std {c.difficulty_std:.4f}, "
            f"weak_level {c.weak_level:.4f}, strong_level {c.strong_level:.4f}, ref_task_noise {c.ref_task_noise:.4f}",
        ]
        for k, v in self.targets.items():
            lo, hi = self.spread[k]
            lines.append(
                f"  {k}: target {v:.4f}, expected {self.achieved[k]:.4f} (worlds {lo:.4f}-{hi:.4f}), "
                f"one draw {self.measured[k]:.4f}"
            )
        for k, (real, sim) in self.unmatched.items():
            lines.append(f"  {k} (not fitted): real {real:.4f}, simulated {sim:.4f}")
        return "\n".join(lines)


def fit_replica(
    start_shares: tuple[float, float],
    weak_mean: float,
    strong_mean: float,
    num_tasks: int,
    n_rollouts: int,
    eval_tasks: int,
    *,
    fit_seeds: Iterable[int] = range(20),
    tolerance: float = 0.02,
    start_mean: float | None = None,
    start_strong_pearson: float | None = None,
    fit_pearson: bool = False,
    **learner_overrides: Any,
) -> ReplicaFit:
    """A world whose starting policy has ``start_shares`` = (share of tasks at 0, share at 1) of
    ``n_rollouts`` samples, and whose references have mean pass rates ``weak_mean`` and
    ``strong_mean``, all as expected values over the worlds of ``fit_seeds`` pooled (the seeds
    :func:`predict_paired` runs on; one seed for a one-world prediction).

    The search: ``difficulty_std`` by bisection, with ``difficulty_mean`` bisected inside it to
    hold the share at 0 (the share at 1 grows with the spread); then ``weak_level`` and
    ``strong_level``, each by bisection on its mean pass rate. The references are measured with
    ``ref_rollouts`` = ``n_rollouts`` unless an override says otherwise; every other field of
    :class:`LearnerConfig` (group_noise, repeat_decay, step_rule, saturation_k,
    trajectory_noise, learning_rate, ...) is settable through ``learner_overrides``.
    ``start_mean`` and ``start_strong_pearson`` (the real values), if given, are reported beside
    the simulated ones, not fitted, unless ``fit_pearson``: then ``ref_task_noise`` (how far each
    reference's per-task rate strays from the learner's, the same for both references) is
    bisected so that the measured correlation of the start's and the strong reference's pass
    rates per task equals ``start_strong_pearson``, the two reference levels refitted at every
    noise tried (more noise, less correlation). Raises ConfigError when a target cannot be met
    within ``tolerance``."""
    began = time.perf_counter()
    at0_t, at1_t = (float(x) for x in start_shares)
    if not (at0_t > 0 and at1_t > 0 and at0_t + at1_t < 1):
        raise ConfigError(f"start_shares: need 0 < at0, 0 < at1, at0 + at1 < 1, got {start_shares!r}")
    for name, v in (("weak_mean", weak_mean), ("strong_mean", strong_mean)):
        if not 0 < v < 1:
            raise ConfigError(f"{name}: need a mean pass rate in (0, 1), got {v!r}")
    if fit_pearson and start_strong_pearson is None:
        raise ConfigError("fit_pearson: needs start_strong_pearson, the correlation to match")
    if start_strong_pearson is not None and not -1 < start_strong_pearson < 1:
        raise ConfigError(f"start_strong_pearson: need a correlation in (-1, 1), got {start_strong_pearson!r}")
    fitted = _FITTED + (("ref_task_noise",) if fit_pearson else ())
    clash = sorted(set(learner_overrides) & set(fitted))
    if clash:
        raise ConfigError(f"learner_overrides: {clash} are what the replica fits")
    seeds = tuple(int(s) for s in fit_seeds)
    if not seeds:
        raise ConfigError("fit_seeds: need at least one world")
    settings = {"ref_rollouts": n_rollouts, **learner_overrides}
    base_cfg = LearnerConfig(num_tasks=num_tasks, n_rollouts=n_rollouts, eval_tasks=eval_tasks, **settings)
    n = n_rollouts

    # The initial logits are difficulty_mean + difficulty_std * z + offset[group] on the same
    # draws whatever the two values (numpy's normal is loc + scale * a standard normal), so two
    # worlds give every world's logits; the final check below draws the worlds themselves.
    def logits(mean: float, std: float) -> FloatArray:
        cfg = replace(base_cfg, difficulty_mean=mean, difficulty_std=std)
        return np.concatenate([make_world(cfg, s).base_logit for s in seeds])

    offset = logits(0.0, 0.0)
    z = logits(0.0, 1.0) - offset

    def mean_for(std: float) -> float:
        return _bisect(lambda m: _at0(m + std * z + offset, n), -60.0, 60.0, at0_t, increasing=False)

    def at1_for(std: float) -> float:
        return _shares(mean_for(std) + std * z + offset, n)[1]

    std = _bisect(at1_for, 0.0, 40.0, at1_t, increasing=True, iters=40, xtol=1e-7)
    mean = mean_for(std)
    cfg = replace(base_cfg, difficulty_mean=mean, difficulty_std=std)

    # The references: the weak one is drawn first, so its level moves nothing the strong one's
    # fit depends on before it; the strong one is fitted with the weak one in place.
    def ref_mean(c: LearnerConfig, which: str) -> float:
        return float(np.mean([getattr(make_world(c, s), f"{which}_true").mean() for s in seeds]))

    def fit_levels(c: LearnerConfig) -> LearnerConfig:
        weak = _bisect(lambda x: ref_mean(replace(c, weak_level=x), "weak"), -40.0, 40.0, weak_mean, True, xtol=1e-4)
        c = replace(c, weak_level=weak)
        strong = _bisect(
            lambda x: ref_mean(replace(c, strong_level=x), "strong"), -40.0, 40.0, strong_mean, True, xtol=1e-4
        )
        return replace(c, strong_level=strong)

    cfg = fit_levels(cfg)
    if fit_pearson:
        assert start_strong_pearson is not None
        target_r = float(start_strong_pearson)
        levels: dict[float, LearnerConfig] = {}

        def at_noise(noise: float) -> LearnerConfig:
            if noise not in levels:
                levels[noise] = fit_levels(replace(cfg, ref_task_noise=noise))
            return levels[noise]

        tried: dict[float, float] = {}

        def corr_at(x: float) -> float:
            tried[x] = _measured_pearson(at_noise(x), seeds, n)
            return tried[x]

        _bisect(corr_at, 0.0, 30.0, target_r, increasing=False, iters=24, xtol=1e-3)
        # The measured correlation is a sample statistic, not exactly monotone in the noise on a
        # small pool: keep the noise tried whose correlation came closest, not the last midpoint.
        noise = min(tried, key=lambda x: abs(tried[x] - target_r))
        cfg = at_noise(noise)

    # The check, on the worlds themselves.
    per: dict[str, list[float]] = {k: [] for k in ("at0", "at1", "start_mean", "weak_mean", "strong_mean")}
    draws: dict[str, list[float]] = {k: [] for k in ("at0", "at1", "between", "start_mean", "weak_mean", "strong_mean")}
    corr: list[float] = []
    for s in seeds:
        w = make_world(cfg, s)
        p = 0.5 * (1.0 + np.tanh(0.5 * w.base_logit))
        a0, a1 = _shares(w.base_logit, n)
        for k, x in (("at0", a0), ("at1", a1), ("start_mean", float(p.mean()))):
            per[k].append(x)
        per["weak_mean"].append(float(w.weak_true.mean()))
        per["strong_mean"].append(float(w.strong_true.mean()))
        k_succ = np.random.default_rng([s, 0x5EB1]).binomial(n, p)
        for k, drawn in (
            ("at0", np.mean(k_succ == 0)),
            ("at1", np.mean(k_succ == n)),
            ("between", np.mean((k_succ > 0) & (k_succ < n))),
            ("start_mean", k_succ.mean() / n),
            ("weak_mean", w.weak.mean()),
            ("strong_mean", w.strong.mean()),
        ):
            draws[k].append(float(drawn))
        corr.append(pearson(k_succ / n, w.strong))
    targets = {"at0": at0_t, "at1": at1_t, "weak_mean": float(weak_mean), "strong_mean": float(strong_mean)}
    if fit_pearson:
        targets["start_strong_pearson"] = float(start_strong_pearson)  # type: ignore[arg-type]
    achieved = {k: float(np.mean(per[k])) for k in targets if k in per}
    if fit_pearson:
        achieved["start_strong_pearson"] = float(np.mean(corr))
        per["start_strong_pearson"] = corr
    measured = {k: float(np.mean(v)) for k, v in draws.items()} | {"start_strong_pearson": float(np.mean(corr))}
    spread = {k: (float(min(v)), float(max(v))) for k, v in per.items()}
    unmatched: dict[str, tuple[float, float]] = {}
    if start_mean is not None:
        unmatched["start_mean"] = (float(start_mean), float(np.mean(per["start_mean"])))
    if start_strong_pearson is not None and not fit_pearson:
        unmatched["start_strong_pearson"] = (float(start_strong_pearson), measured["start_strong_pearson"])
    fit = ReplicaFit(
        cfg, targets, achieved, measured, spread, unmatched, seeds, float(tolerance), time.perf_counter() - began
    )
    off = {k: e for k, e in fit.errors.items() if not abs(e) <= tolerance}
    if off:
        raise ConfigError(
            "replica: cannot match "
            + ", ".join(f"{k} (target {targets[k]:g}, got {achieved[k]:.4f})" for k in off)
            + f" within ±{tolerance:g}"
        )
    return fit


#: What the calibration of the real trainer held fixed in every rule it fitted: a group of n
#: rollouts counts n / (n + 4) of its signal, and a task trained on again transfers as much as the
#: first time (the pool it was fitted on repeated almost no task, so it could not fit a decay).
CALIBRATION_LEARNER: dict[str, Any] = {"group_noise": 4.0, "repeat_decay": 1.0}


def calibrated_learner(best: Mapping[str, Any]) -> dict[str, Any]:
    """The learner settings of the calibration's best rule (a calibration JSON's first
    prediction: progress proportional to the batch's summed signal, no saturation, with its
    fitted learning rate and trajectory noise), with what the calibration held fixed."""
    return {
        **CALIBRATION_LEARNER,
        "step_rule": "saturating",
        "saturation_k": NO_SATURATION_K,
        "learning_rate": best["learning_rate"],
        "trajectory_noise": best["trajectory_noise"],
    }


def fit_pool_replica(pool: Mapping[str, Any], *, fit_pearson: bool = False, **learner_overrides: Any) -> ReplicaFit:
    """:func:`fit_replica` on a pool described as :data:`TRIAL_STRINGS_POOL` is (its starting
    shares, reference means, sizes, starting mean and start-strong correlation), in the one world
    of seed 0, as a trial runs one pool and one starting policy."""
    return fit_replica(
        pool["start_shares"],
        pool["weak_mean"],
        pool["strong_mean"],
        pool["num_tasks"],
        pool["n_rollouts"],
        pool["eval_tasks"],
        fit_seeds=[0],
        start_mean=pool["start_mean"],
        start_strong_pearson=pool["start_strong_pearson"],
        fit_pearson=fit_pearson,
        **learner_overrides,
    )


def _measured_pearson(c: LearnerConfig, seeds: Sequence[int], n: int) -> float:
    """The mean over the worlds of ``seeds`` of the per-task correlation between the start
    policy's pass rate measured with ``n`` samples and the strong reference's measured rate: the
    statistic a real pool gives (both sides measured, neither the true rate). The start's samples
    come from the same stream as the fit's own check."""
    out = []
    for s in seeds:
        w = make_world(c, s)
        p = 0.5 * (1.0 + np.tanh(0.5 * w.base_logit))
        k_succ = np.random.default_rng([s, 0x5EB1]).binomial(n, p)
        out.append(pearson(k_succ / n, w.strong))
    return float(np.mean(out))


def replica_learner(
    start_shares: tuple[float, float],
    weak_mean: float,
    strong_mean: float,
    num_tasks: int,
    n_rollouts: int,
    eval_tasks: int,
    **learner_overrides: Any,
) -> LearnerConfig:
    """:func:`fit_replica`'s learner (the same arguments; ``fit_seeds``, ``tolerance`` and the
    report-only targets pass through ``learner_overrides``'s keywords too)."""
    return fit_replica(
        start_shares, weak_mean, strong_mean, num_tasks, n_rollouts, eval_tasks, **learner_overrides
    ).learner


MethodsArg = Sequence[str | MethodSpec] | Mapping[str, str | MethodSpec]


def _specs(methods: MethodsArg) -> dict[str, MethodSpec]:
    items: Iterable[tuple[str, str | MethodSpec]]
    if isinstance(methods, Mapping):
        items = methods.items()
    else:
        items = ((m if isinstance(m, str) else m.key, m) for m in methods)
    out: dict[str, MethodSpec] = {}
    for label, m in items:
        if label in out:
            raise ConfigError(f"methods: {label!r} named twice")
        out[label] = m if isinstance(m, MethodSpec) else MethodSpec(m)
    if not out:
        raise ConfigError("methods: need at least one")
    return out


def predict_paired(
    learner: LearnerConfig,
    methods: MethodsArg = ("random", "bots"),
    seeds: Iterable[int] = range(20),
    steps: int = 100,
    batch_size: int = 16,
    eval_every: int = 10,
    baseline: str = "random",
    *,
    world_seed: int | None = None,
) -> dict[str, Any]:
    """Run every method on every seed and pair them by seed against ``baseline``.

    ``methods``: names of :data:`bots_rft.selector.registry.METHODS` (a name is its method at the paper's
    defaults: "bots" is λ = ρ = 0.1, p* = 0.5, Thompson sampling), :class:`MethodSpec` (labelled
    by their key), or a mapping label -> either. The baseline must be one of the labels.
    ``world_seed``: None (default) draws a world per seed, shared by that seed's methods, as
    ``run_experiment`` and the scoreboard do; an int runs every seed in that one world (as a real
    trial runs one pool and one starting policy, its seeds varying only the training).

    A run's primary metric is the mean of its held-out score at steps 0, eval_every, ..., steps.
    Returns ``{"baseline", "seeds", "world_seed", "steps", "batch_size", "eval_every", "start"
    (the baseline's mean score at step 0), "baseline_gain" (its mean primary - score at step 0),
    "baseline_sd" (its SD over seeds of the primary), "seconds", "runs", "methods"}`` with, per
    label: ``key``, ``primary`` (mean over seeds), ``primary_sd``, ``gain`` (mean primary - step-0
    score), ``diff`` / ``diff_half`` / ``diff_n`` / ``diff_sd`` (the paired difference from the
    baseline: mean, 95% Student-t half-width, seeds, SD over seeds), ``baseline_gain``,
    ``relative`` / ``relative_half`` (the difference and half-width divided by the baseline's mean
    gain: the difference in units of the baseline's own gain over the run) and ``per_seed`` (the
    primary metric of each seed)."""
    began = time.perf_counter()
    specs = _specs(methods)
    if baseline not in specs:
        raise ConfigError(f"baseline: {baseline!r} is not one of the methods {list(specs)}")
    seed_list = tuple(int(s) for s in seeds)
    if isinstance(eval_every, bool) or not isinstance(eval_every, int) or eval_every <= 0 or steps % eval_every:
        raise ConfigError(f"eval_every: need a positive int dividing steps={steps}, got {eval_every!r}")
    sim = SimConfig(learner=learner, steps=steps, batch_size=batch_size, seeds=seed_list, methods=("random",))
    evals = np.arange(0, steps + 1, eval_every)
    primary = {label: np.zeros(len(seed_list)) for label in specs}
    start = {label: np.zeros(len(seed_list)) for label in specs}
    for i, seed in enumerate(seed_list):
        world = make_world(learner, seed if world_seed is None else world_seed)
        for label, spec in specs.items():
            rec = run_method(spec, world, seed, sim)
            primary[label][i] = float(rec.perf[evals].mean())
            start[label][i] = float(rec.perf[0])
    base = primary[baseline]
    base_gain = float(np.mean(base - start[baseline]))
    out: dict[str, Any] = {
        "baseline": baseline,
        "seeds": list(seed_list),
        "world_seed": world_seed,
        "steps": steps,
        "batch_size": batch_size,
        "eval_every": eval_every,
        "start": float(np.mean(start[baseline])),
        "baseline_gain": base_gain,
        "baseline_sd": _sd(base),
        "methods": {},
        "runs": len(seed_list) * len(specs),
    }
    for label, spec in specs.items():
        d = primary[label] - base
        mean, half = (float(x) for x in mean_ci(d))
        scale = base_gain if base_gain != 0 else math.nan
        out["methods"][label] = {
            "key": spec.key,
            "primary": float(primary[label].mean()),
            "primary_sd": _sd(primary[label]),
            "gain": float(np.mean(primary[label] - start[label])),
            "diff": mean,
            "diff_half": half,
            "diff_n": int(d.size),
            "diff_sd": _sd(d),
            "baseline_gain": base_gain,
            "relative": mean / scale,
            "relative_half": half / scale,
            "per_seed": [float(x) for x in primary[label]],
        }
    out["seconds"] = time.perf_counter() - began
    return out


def _sd(x: FloatArray) -> float:
    return float(np.std(x, ddof=1)) if x.size > 1 else 0.0


def fit_trajectory_noise(
    learner: LearnerConfig,
    target_sd_ratio: float,
    grid: Sequence[float] = SIGMA_GRID,
    **predict_kwargs: Any,
) -> tuple[float, list[dict[str, float]]]:
    """The ``trajectory_noise`` σ of ``grid`` whose simulated ratio (SD over seeds of the
    baseline's primary metric) / (the baseline's mean gain over the run) is closest to
    ``target_sd_ratio``, the same ratio of the real Random arm; and the table of every σ tried
    (sigma, sd, gain, ratio). ``predict_kwargs`` go to :func:`predict_paired`; by default only
    Random runs, and every seed in one world (``world_seed`` 0), as the real arm's seeds share
    one pool and starting policy (worlds differing per seed would add their own spread)."""
    if not grid:
        raise ConfigError("grid: need at least one sigma")
    kwargs = {"methods": ("random",), "world_seed": 0, **predict_kwargs}
    table = []
    for sigma in grid:
        r = predict_paired(replace(learner, trajectory_noise=float(sigma)), **kwargs)
        gain = r["baseline_gain"]
        table.append(
            {
                "sigma": float(sigma),
                "sd": r["baseline_sd"],
                "gain": gain,
                "ratio": r["baseline_sd"] / gain if gain > 0 else math.inf,
            }
        )
    best = min(table, key=lambda row: abs(row["ratio"] - target_sd_ratio))
    return best["sigma"], table


def fit_learning_rate(
    learner: LearnerConfig,
    target_relative_gain: float,
    *,
    rtol: float = 0.01,
    max_iter: int = 30,
    factor: float = 4.0,
    lr_bounds: tuple[float, float] = (1e-6, 1e4),
    **predict_kwargs: Any,
) -> tuple[float, list[dict[str, float]]]:
    """The ``learning_rate`` at which the baseline's (Random's) mean gain over the run relative
    to its start, mean(primary - score at step 0) / mean(score at step 0), equals
    ``target_relative_gain`` (the real Random arm's); and the table of every rate tried
    (learning_rate, gain, start, relative_gain).

    Bisection on a log scale: from the learner's own rate, the bracket widens by ``factor`` until
    it holds the target, then halves (geometric midpoints) until the relative gain is within
    ``rtol`` x target, or ``max_iter`` evaluations; the closest rate tried is returned.
    ``predict_kwargs`` go to :func:`predict_paired` (default: Random only; the same seeds for
    every rate, so the comparison is with common random numbers). Raises ConfigError when no
    rate within ``lr_bounds`` brackets the target."""
    if not target_relative_gain > 0:
        raise ConfigError(f"target_relative_gain: need > 0, got {target_relative_gain!r}")
    kwargs = {"methods": ("random",), **predict_kwargs}
    table: list[dict[str, float]] = []

    def rel(lr: float) -> float:
        r = predict_paired(replace(learner, learning_rate=lr), **kwargs)
        value = r["baseline_gain"] / r["start"]
        table.append({"learning_rate": lr, "gain": r["baseline_gain"], "start": r["start"], "relative_gain": value})
        return value

    def close(v: float) -> bool:
        return abs(v - target_relative_gain) <= rtol * target_relative_gain

    lr = learner.step_size if learner.step_size > 0 else 0.06
    v = rel(lr)
    lo = hi = lr
    if not close(v):
        up = v < target_relative_gain
        while (v < target_relative_gain) == up and not close(v):
            nxt = lr * factor if up else lr / factor
            if not lr_bounds[0] <= nxt <= lr_bounds[1] or len(table) >= max_iter:
                raise ConfigError(
                    f"fit_learning_rate: no rate in {lr_bounds} brackets relative gain {target_relative_gain:g} "
                    f"(last {lr:g} -> {v:.4g})"
                )
            lr, v = nxt, rel(nxt)
        lo, hi = (lr / factor, lr) if up else (lr, lr * factor)
        while not close(v) and len(table) < max_iter:
            mid = math.sqrt(lo * hi)
            v = rel(mid)
            if v < target_relative_gain:
                lo = mid
            else:
                hi = mid
    best = min(table, key=lambda row: abs(row["relative_gain"] - target_relative_gain))
    return best["learning_rate"], table
