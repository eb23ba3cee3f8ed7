"""Which learning rule the real trainer follows: the simulated learner's step rule tested against
real GRPO runs.

The simulated learner (:mod:`bots_rft.simulate.learner`) turns a batch's summed learning signal
S = Σ 4 r (1 − r) into progress by a rule: ``linear`` (S / B, the batch mean: zero-variance groups
dilute a step) or ``saturating`` (S / (S + K), whatever the batch size). Real runs log every step's
task ids and successes, so each run's signals S_t are known, and each candidate rule predicts how
much progress the run made: the held-out accuracy over the run, measured from the start, as the
mean over the evaluation steps e of the cumulative progress Σ_{t ≤ e} u(S_t). A rule that is right
predicts the runs' gains up to one scale factor c, across arms whose batches differ (diluted with
zero-variance groups, or richer in informative ones) and across seeds. :func:`fit_step_rule`
fits c by least squares for each candidate and ranks the candidates by the residual: the rule the
data supports is the one with the smallest.

Only the *shape* of the rule is tested here (how progress depends on S and B); the simulated
world's other settings (pool size, difficulty, references) describe a different pool and are not
fitted to a strings pool.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import InvalidArgumentError
from .training import RunCurves

__all__ = ["RunSignal", "run_signal", "Candidate", "CANDIDATES", "Fit", "fit_step_rule", "fit_markdown"]


@dataclass(frozen=True)
class RunSignal:
    """One real run, reduced to what a step rule predicts from and what it must predict."""

    label: str
    signal: np.ndarray  # [steps] S_t: the step's summed 4 r (1 - r) over its groups
    batch: np.ndarray  # [steps] B_t: groups trained on
    eval_steps: np.ndarray  # steps at which held-out accuracy was measured (0 first)
    gain: float  # mean held-out accuracy over the run minus the start's (the step-0 evaluation)


def run_signal(label: str, run: RunCurves) -> RunSignal:
    """``run``'s per-step signals and its held-out gain over the run."""
    per_task = int(run.config.get("rollouts", 0)) or None
    signal, batch = [], []
    for rec in run.train:
        ids, succ = rec.get("task_ids"), rec.get("successes")
        if ids is None or succ is None:
            raise InvalidArgumentError(f"run {label!r}: a step record lacks task_ids/successes", "run")
        counts = rec.get("rollout_counts")
        trials = np.asarray(counts if counts is not None else [per_task] * len(ids), dtype=np.float64)
        rate = np.asarray(succ, dtype=np.float64) / trials
        signal.append(float(np.sum(4.0 * rate * (1.0 - rate))))
        batch.append(len(ids))
    steps = run.eval_steps
    if steps.size < 2 or steps[0] != 0:
        raise InvalidArgumentError(f"run {label!r}: needs a step-0 evaluation and one after it", "run")
    acc = run.eval_acc
    return RunSignal(label, np.asarray(signal), np.asarray(batch, np.float64), steps, float(np.mean(acc[1:]) - acc[0]))


@dataclass(frozen=True)
class Candidate:
    """A step rule: ``linear`` or ``saturating`` with its K (``math.inf``: progress ∝ S, no
    saturation at all; 0: every step with any signal alike)."""

    rule: str
    k: float = 0.0

    @property
    def name(self) -> str:
        if self.rule == "linear":
            return "linear (S / B)"
        return "saturating, K = ∞ (S)" if math.isinf(self.k) else f"saturating, K = {self.k:g}"

    def units(self, signal: np.ndarray, batch: np.ndarray) -> np.ndarray:
        if self.rule == "linear":
            return signal / batch
        if math.isinf(self.k):
            return signal.copy()
        total = signal + self.k
        return np.divide(signal, total, out=np.zeros_like(signal), where=total > 0)


#: The rules tried: the old linear rule and saturating rules over a range of K.
CANDIDATES: tuple[Candidate, ...] = (
    Candidate("linear"),
    *(Candidate("saturating", k) for k in (0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, math.inf)),
)


def _predicted(c: Candidate, run: RunSignal) -> float:
    """The mean over evaluations after the start of the cumulative progress up to each one."""
    cumulative = np.concatenate([[0.0], np.cumsum(c.units(run.signal, run.batch))])
    at = np.clip(run.eval_steps[1:].astype(np.int64), 0, run.signal.size)
    return float(np.mean(cumulative[at]))


@dataclass(frozen=True)
class Fit:
    candidate: Candidate
    scale: float  # c: held-out gain per unit of predicted progress
    rss: float  # residual sum of squares of the runs' gains
    arm_ratio: dict[str, float]  # per arm: predicted mean gain / the reference arm's


def fit_step_rule(
    arms: Mapping[str, Sequence[RunSignal]], reference: str, candidates: Sequence[Candidate] = CANDIDATES
) -> list[Fit]:
    """Every candidate fitted to the runs of every arm (gain ≈ c · predicted progress, c ≥ 0 by
    least squares through the origin), best (smallest residual) first. ``arm_ratio`` is what the
    candidate predicts for each arm's mean gain relative to ``reference``'s, to set beside the
    observed ratio."""
    if reference not in arms or not arms[reference]:
        raise InvalidArgumentError(f"reference: no runs for arm {reference!r}", "reference")
    runs = [r for rs in arms.values() for r in rs]
    gains = np.asarray([r.gain for r in runs])
    fits = []
    for c in candidates:
        x = np.asarray([_predicted(c, r) for r in runs])
        scale = float(max(0.0, x @ gains / (x @ x))) if x @ x > 0 else 0.0
        rss = float(np.sum((gains - scale * x) ** 2))
        ref = float(np.mean([_predicted(c, r) for r in arms[reference]]))
        ratio = {
            a: float(np.mean([_predicted(c, r) for r in rs])) / ref if ref > 0 else math.nan for a, rs in arms.items()
        }
        fits.append(Fit(c, scale, rss, ratio))
    return sorted(fits, key=lambda f: f.rss)


def observed_ratios(arms: Mapping[str, Sequence[RunSignal]], reference: str) -> dict[str, tuple[float, float, float]]:
    """Per arm: its mean gain / the reference arm's, with a 95% interval from the seeds paired by
    position (the arms' runs listed seed by seed), by the delta method on the paired differences
    of gain − ratio · reference gain (Fieller's interval when it is bounded)."""
    from ..metrics import mean_ci

    ref = np.asarray([r.gain for r in arms[reference]])
    out = {}
    for arm, rs in arms.items():
        g = np.asarray([r.gain for r in rs])
        n = min(g.size, ref.size)
        ratio = float(g[:n].mean() / ref[:n].mean())
        _, half = mean_ci(g[:n] - ratio * ref[:n])
        se_ref = float(ref[:n].mean())
        out[arm] = (ratio, ratio - float(half) / se_ref, ratio + float(half) / se_ref)
    return out


def fit_markdown(arms: Mapping[str, Sequence[RunSignal]], reference: str, fits: Sequence[Fit]) -> str:
    """The observed gain ratios and each candidate's predicted ratios and residual, as markdown."""
    obs = observed_ratios(arms, reference)
    names = list(arms)
    head = "| Rule | " + " | ".join(f"{a} / {reference} (predicted)" for a in names if a != reference)
    head += " | residual (sum of squares) |"
    lines = [
        "| Arm | runs | mean held-out gain over the run | gain / "
        + reference
        + " (observed, 95%) | mean signal a step |",
        "|---|---:|---:|---:|---:|",
    ]
    for a in names:
        rs = arms[a]
        r, lo, hi = obs[a]
        lines.append(
            f"| {a} | {len(rs)} | {np.mean([x.gain for x in rs]):+.4f} | {r:.2f} [{lo:.2f}, {hi:.2f}] "
            f"| {np.mean([x.signal.mean() for x in rs]):.2f} |"
        )
    lines += ["", head, "|---|" + "---:|" * (len(names) - 1) + "---:|"]
    for f in fits:
        cells = " | ".join(f"{f.arm_ratio[a]:.2f}" for a in names if a != reference)
        lines.append(f"| {f.candidate.name} | {cells} | {f.rss:.5f} |")
    return "\n".join(lines)
