"""A comparison read as a trial: every run's held-out evaluations as one table (OUT/held_out.csv),
the primary metric (each run's mean held-out accuracy over its evaluations: the area under its
held-out curve per evaluation, every run on one evaluation schedule), paired by seed against a
baseline with 95% Student-t intervals, a decision rule fixed in advance and the verdict it gives,
and the rollouts the reference models cost, charged to the methods that read them.

The rule is either one comparison (:class:`DecisionRule`: a method against a baseline and a
control) or several contrasts decided together (:class:`ContrastRule`: two-sided paired t-tests,
Holm's step-down correction for the family-wise error, an equivalence margin)."""

from __future__ import annotations

import csv
import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from ..errors import InvalidArgumentError
from ..metrics import mean_ci
from .training import RunCurves

if TYPE_CHECKING:
    from ..train.comparison import ReferenceSpec

__all__ = [
    "held_out_rows",
    "write_held_out_csv",
    "read_held_out_csv",
    "primary_column",
    "Interval",
    "paired_interval",
    "DecisionRule",
    "Outcome",
    "decide",
    "Contrast",
    "ContrastRule",
    "ContrastResult",
    "ContrastOutcome",
    "decide_contrasts",
    "holm",
    "t_test_p",
    "reference_cost",
    "trial_markdown",
    "SAVES",
    "COSTS",
    "ONLINE",
    "REFUTED",
    "INCONCLUSIVE",
    "SUPPORTED",
    "HARMFUL",
    "DOES_NOT_MATTER",
    "UNDECIDED",
    "NOT_READ",
]

# The verdicts, worded as the decision rule gives them.
SAVES = "saves rollouts given these references"
COSTS = "costs accuracy"
ONLINE = "the online part matters"
REFUTED = "refuted at this scale"
INCONCLUSIVE = "inconclusive at this scale"
# The verdicts of a contrast under a :class:`ContrastRule`.
SUPPORTED = "supported"
HARMFUL = "harmful"
DOES_NOT_MATTER = "does not matter at this scale"
UNDECIDED = "inconclusive"
# A ContrastRule's learning check failed: no contrast is read.
NOT_READ = "not read"

_KEYS = ("method", "seed", "step", "rollouts")
Rows = list[dict[str, Any]]


def _eval_samples(groups: dict[str, list[RunCurves]]) -> int:
    """The runs' ``eval_samples`` (0 when there are no runs); runs that disagree are refused: one
    table holds one measure."""
    ks = sorted({int(r.config.get("eval_samples", 0) or 0) for runs in groups.values() for r in runs})
    if len(ks) > 1:
        raise InvalidArgumentError(f"groups: runs evaluated with different eval_samples {ks}; expected one", "groups")
    return ks[0] if ks else 0


def _columns(k: int) -> tuple[str, ...]:
    # Without sampled evaluations (eval_samples 0) the logged accuracy is the greedy one.
    return (*_KEYS, f"avg_at_{k}", "greedy") if k > 0 else (*_KEYS, "greedy")


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def held_out_rows(groups: dict[str, list[RunCurves]]) -> Rows:
    """One row per evaluation of every run: method (the group's name), seed (the run's RL seed),
    step, rollouts spent before it, ``avg_at_<k>`` (the mean of k samples per held-out task, k the
    runs' ``eval_samples``) and ``greedy`` (None when the run did not evaluate greedily). Without
    sampled evaluations there is no ``avg_at_<k>`` column and ``greedy`` is the logged accuracy."""
    k = _eval_samples(groups)
    rows = []
    for method, runs in groups.items():
        for run in runs:
            seed = run.config.get("seed")
            for rec, spent in zip(run.evals, run.eval_rollouts):
                row: dict[str, Any] = {
                    "method": method,
                    "seed": None if seed is None else int(seed),
                    "step": int(rec["step"]),
                    "rollouts": int(round(float(spent))),
                }
                if k > 0:
                    row[f"avg_at_{k}"] = _number(rec.get("accuracy"))
                    row["greedy"] = _number(rec.get("greedy_accuracy"))
                else:
                    row["greedy"] = _number(rec.get("accuracy"))
                rows.append(row)
    return rows


def write_held_out_csv(groups: dict[str, list[RunCurves]], path: str | Path) -> Path:
    """:func:`held_out_rows` as CSV (an empty cell where a value is missing; floats written in
    full, so :func:`read_held_out_csv` gives the same rows back); the path written."""
    columns = _columns(_eval_samples(groups))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(columns)
        for row in held_out_rows(groups):
            writer.writerow(
                ["" if row[c] is None else repr(row[c]) if isinstance(row[c], float) else row[c] for c in columns]
            )
    return out


def _sampled(columns: Iterable[str]) -> str | None:
    return next((c for c in columns if c.startswith("avg_at_")), None)


def read_held_out_csv(path: str | Path) -> Rows:
    """The rows :func:`write_held_out_csv` wrote (a file with another header is refused)."""
    with Path(path).open(encoding="utf-8", newline="") as f:
        reader = csv.reader(f)
        header = tuple(next(reader, ()))
        suffix = (_sampled(header) or "avg_at_0").removeprefix("avg_at_")
        expected = _columns(int(suffix)) if suffix.isdigit() else (*_KEYS, "avg_at_<k>", "greedy")
        if header != expected:
            raise InvalidArgumentError(
                f"path: {str(path)!r} has the header {','.join(header)!r}; expected {','.join(expected)!r}", "path"
            )
        rows = []
        for line, cells in enumerate(reader, start=2):
            row: dict[str, Any] = dict(zip(header, cells))
            try:
                if len(cells) != len(header):
                    raise ValueError
                row["seed"] = int(row["seed"]) if row["seed"] else None
                row["step"], row["rollouts"] = int(row["step"]), int(row["rollouts"])
                for c in header[len(_KEYS) :]:
                    row[c] = float(row[c]) if row[c] else None
            except ValueError:
                raise InvalidArgumentError(
                    f"path: {str(path)!r} line {line} is no row: {','.join(cells)!r}", "path"
                ) from None
            rows.append(row)
    return rows


def primary_column(rows: Rows) -> str:
    """The column the primary metric averages: the sampled accuracy, else (no sampled
    evaluations) the greedy one."""
    return (_sampled(rows[0]) if rows else None) or "greedy"


def _runs(rows: Rows) -> dict[str, dict[int | None, Rows]]:
    """method -> seed -> that run's rows by step, methods in the order they first appear."""
    out: dict[str, dict[int | None, Rows]] = {}
    for row in rows:
        out.setdefault(row["method"], {}).setdefault(row["seed"], []).append(row)
    for by_seed in out.values():
        for run_rows in by_seed.values():
            run_rows.sort(key=lambda r: r["step"])
    return out


def _schedule(rows: Rows) -> list[int]:
    """The evaluation steps every run shares. The mean over a run is a fair comparison only when
    every run was evaluated at the same steps, so runs on other schedules are refused."""
    first: tuple[str, int | None, list[int]] | None = None
    for method, by_seed in _runs(rows).items():
        for seed, run_rows in by_seed.items():
            steps = [r["step"] for r in run_rows]
            if first is None:
                first = (method, seed, steps)
            elif steps != first[2]:
                raise InvalidArgumentError(
                    f"rows: {method} seed {seed} was evaluated at steps {steps}, {first[0]} seed {first[1]} at "
                    f"{first[2]}; the mean over the run needs every run on one evaluation schedule",
                    "rows",
                )
    return [] if first is None else first[2]


def _per_run(rows: Rows, column: str, how: str) -> dict[str, dict[int | None, float]]:
    """method -> seed -> the run's ``column`` averaged over its evaluations (``how="mean"``), at
    its last evaluation (``"final"``); NaN where it has no value."""
    out: dict[str, dict[int | None, float]] = {}
    for method, by_seed in _runs(rows).items():
        for seed, run_rows in by_seed.items():
            if how == "final":
                last = run_rows[-1].get(column)
                value = math.nan if last is None else float(last)
            else:
                values = [float(r[column]) for r in run_rows if r.get(column) is not None]
                value = float(np.mean(values)) if values else math.nan
            out.setdefault(method, {})[seed] = value
    return out


@dataclass(frozen=True)
class Interval:
    """A mean and the half-width of its 95% Student-t interval over ``n`` values."""

    mean: float
    half: float
    n: int

    @property
    def low(self) -> float:
        return self.mean - self.half

    @property
    def high(self) -> float:
        return self.mean + self.half

    @property
    def excludes_zero(self) -> bool:
        # One value has no spread to judge it by: never significant.
        return self.n >= 2 and (self.low > 0 or self.high < 0)

    @classmethod
    def of(cls, values: Iterable[float]) -> Interval:
        arr = np.asarray([v for v in values if v == v], dtype=np.float64)
        if arr.size == 0:
            return cls(math.nan, math.nan, 0)
        mean, half = mean_ci(arr)
        return cls(float(mean), float(half), int(arr.size))

    def text(self, digits: int = 3, signed: bool = True, mark: bool = False) -> str:
        if self.n == 0:
            return "-"
        star = " *" if mark and self.excludes_zero else ""
        group = "," if digits == 0 else ""  # counts (rollouts) read better grouped
        return f"{self.mean:{'+' if signed else ''}{group}.{digits}f} ± {self.half:{group}.{digits}f}{star}"


def paired_interval(a: Mapping[Any, float], b: Mapping[Any, float]) -> Interval:
    """``a - b`` paired by seed (the seeds both have) as a 95% Student-t interval."""
    return Interval.of(a[s] - b[s] for s in a if s in b)


@dataclass(frozen=True)
class DecisionRule:
    """A decision rule fixed before the runs: ``method`` against ``baseline`` (and ``control``,
    the same information without the online part) on the primary metric, paired by seed; an
    interval of ``method - baseline`` inside ±``refute_within`` refutes it at this scale."""

    method: str = "bots"
    baseline: str = "random"
    control: str | None = None
    refute_within: float = 0.005

    def __post_init__(self) -> None:
        if not (self.refute_within >= 0 and math.isfinite(self.refute_within)):
            raise InvalidArgumentError(
                f"refute_within: expected a finite number >= 0, got {self.refute_within!r}", "refute_within"
            )
        for name in ("baseline", "control"):
            if getattr(self, name) == self.method:
                raise InvalidArgumentError(f"{name}: expected a method other than {self.method!r}", name)


@dataclass(frozen=True)
class Outcome:
    """What a :class:`DecisionRule` gives on one measure: the paired intervals and the verdict."""

    rule: DecisionRule
    column: str
    versus_baseline: Interval
    versus_control: Interval | None
    verdict: str
    online_matters: bool

    @property
    def text(self) -> str:
        """The verdict as the rule words it (``saves rollouts ...; the online part matters``)."""
        return f"{self.verdict}; {ONLINE}" if self.online_matters else self.verdict

    def line(self) -> str:
        """The intervals and the verdict in one sentence."""
        r = self.rule
        parts = [f"{r.method} − {r.baseline} = {self.versus_baseline.text()} ({self.versus_baseline.n} paired seeds)"]
        if self.versus_control is not None:
            parts.append(
                f"{r.method} − {r.control} = {self.versus_control.text()} ({self.versus_control.n} paired seeds)"
            )
        return f"{'; '.join(parts)} → {r.method}: {self.text}"


@overload
def decide(rows: Rows, rule: DecisionRule, column: str | None = None) -> Outcome: ...


@overload
def decide(rows: Rows, rule: ContrastRule, column: str | None = None) -> ContrastOutcome: ...


def decide(rows: Rows, rule: DecisionRule | ContrastRule, column: str | None = None) -> Outcome | ContrastOutcome:
    """The rule's verdict on ``column`` (default: the primary metric's) averaged over each run,
    paired by seed, in the rule's order: the ``method - baseline`` interval above 0 "saves
    rollouts given these references" (and with ``method - control`` also above 0, "the online part
    matters"), below 0 "costs accuracy"; else inside ±``refute_within`` "refuted at this scale";
    else "inconclusive at this scale". Fewer than 2 paired seeds decide nothing (inconclusive).
    A :class:`ContrastRule` is decided by :func:`decide_contrasts`."""
    if isinstance(rule, ContrastRule):
        return decide_contrasts(rows, rule, column)
    column = column or primary_column(rows)
    _schedule(rows)
    over = _per_run(rows, column, "mean")
    for role in ("method", "baseline", "control"):
        name = getattr(rule, role)
        if name is not None and name not in over:
            raise InvalidArgumentError(f"rule: the {role} {name!r} has no runs among {sorted(over)}", "rule")
    versus = paired_interval(over[rule.method], over[rule.baseline])
    control = None if rule.control is None else paired_interval(over[rule.method], over[rule.control])
    online = False
    if versus.excludes_zero and versus.low > 0:
        verdict = SAVES
        online = control is not None and control.excludes_zero and control.low > 0
    elif versus.excludes_zero:
        verdict = COSTS
    elif versus.n >= 2 and -rule.refute_within <= versus.low and versus.high <= rule.refute_within:
        verdict = REFUTED
    else:
        verdict = INCONCLUSIVE
    return Outcome(rule, column, versus, control, verdict, online)


# ---------------------------------------------------------------------------------------------
# Several contrasts, Holm's correction
# ---------------------------------------------------------------------------------------------


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz), which converges
    fast for ``x < (a + 1) / (a + b + 2)``."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        for aa in (
            m * (b - m) * x / ((a + 2 * m - 1.0) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1.0)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _regularized_beta(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (scipy is not a runtime dependency)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def t_test_p(t: float, df: float) -> float:
    """The two-sided p-value of Student's t statistic ``t`` with ``df`` degrees of freedom:
    P(|T| >= |t|) = I_{df / (df + t²)}(df / 2, 1 / 2). NaN for a NaN ``t`` or ``df`` < 1."""
    if math.isnan(t) or not df >= 1:
        return math.nan
    if math.isinf(t):
        return 0.0
    return min(1.0, max(0.0, _regularized_beta(df / 2.0, 0.5, df / (df + t * t))))


def holm(p_values: Iterable[float], alpha: float) -> list[tuple[float, bool]]:
    """Holm's step-down correction of ``p_values`` (in their order): for each, the level it is
    tested at and whether it is rejected. The p-values sorted ascending (ties and NaN, which is
    never rejected, in their given order, NaN last), the i-th (from 0) of m is tested at
    ``alpha / (m - i)`` and rejected when p <= that level and every one before it was rejected."""
    ps = list(p_values)
    m = len(ps)
    order = sorted(range(m), key=lambda i: (math.isnan(ps[i]), 0.0 if math.isnan(ps[i]) else ps[i], i))
    out: list[tuple[float, bool]] = [(math.nan, False)] * m
    rejecting = True
    for rank, i in enumerate(order):
        level = alpha / (m - rank)
        rejecting = rejecting and ps[i] <= level  # NaN <= level is False
        out[i] = (level, rejecting)
    return out


@dataclass(frozen=True)
class Contrast:
    """One contrast of a :class:`ContrastRule`: ``method`` minus ``baseline`` on the primary
    metric, paired by seed; ``name`` (default C1, C2, ... by its place in the rule)."""

    method: str
    baseline: str
    name: str | None = None

    def __post_init__(self) -> None:
        if self.baseline == self.method:
            raise InvalidArgumentError(f"baseline: expected a method other than {self.method!r}", "baseline")
        if self.name is not None and not self.name.strip():
            raise InvalidArgumentError(f"name: expected a non-empty name, got {self.name!r}", "name")


@dataclass(frozen=True)
class ContrastRule:
    """A decision rule over several contrasts fixed before the runs: each contrast's paired
    differences over seeds get a two-sided paired t-test, and the p-values Holm's step-down
    correction (``correction``, the only one) at family-wise level ``alpha``. A rejected contrast
    is "supported" (mean above 0) or "harmful" (below); one whose 95% interval lies inside
    ±``equivalence`` "does not matter at this scale"; any other is "inconclusive".

    Two optional checks gate the reading: ``learning_check`` names an arm whose gain over the run
    (each seed's mean score at the evaluations after step 0 minus its step-0 score) must have a
    95% interval above 0, else every contrast is "not read" (the runs did not learn enough to
    compare); ``etr_margin`` (with ``learning_check``): a contrast whose method's mean training ETR
    exceeds that arm's by this or less is reported as its method not having changed what it
    trained on, not as evidence on its mechanism."""

    contrasts: tuple[Contrast, ...]
    alpha: float = 0.05
    equivalence: float = 0.0075
    correction: str = "holm"
    learning_check: str | None = None
    etr_margin: float | None = None

    def __post_init__(self) -> None:
        if not self.contrasts:
            raise InvalidArgumentError("contrasts: expected at least one contrast", "contrasts")
        if not (0.0 < self.alpha < 1.0):
            raise InvalidArgumentError(f"alpha: expected a number in (0, 1), got {self.alpha!r}", "alpha")
        if not (self.equivalence >= 0 and math.isfinite(self.equivalence)):
            raise InvalidArgumentError(
                f"equivalence: expected a finite number >= 0, got {self.equivalence!r}", "equivalence"
            )
        if self.correction != "holm":
            raise InvalidArgumentError(f"correction: expected 'holm', got {self.correction!r}", "correction")
        if self.etr_margin is not None:
            if self.learning_check is None:
                raise InvalidArgumentError(
                    "etr_margin: needs learning_check (the arm whose training ETR the margin is over)", "etr_margin"
                )
            if not (self.etr_margin >= 0 and math.isfinite(self.etr_margin)):
                raise InvalidArgumentError(
                    f"etr_margin: expected a finite number >= 0, got {self.etr_margin!r}", "etr_margin"
                )
        names = self.names
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise InvalidArgumentError(
                f"contrasts: the name(s) {twice} are given to more than one contrast", "contrasts"
            )
        pairs = [(c.method, c.baseline) for c in self.contrasts]
        again = sorted({f"{a} − {b}" for a, b in pairs if pairs.count((a, b)) > 1})
        if again:
            raise InvalidArgumentError(f"contrasts: {again} given more than once", "contrasts")

    @property
    def names(self) -> tuple[str, ...]:
        """Each contrast's name: its own, else C1, C2, ... by its place."""
        return tuple(c.name or f"C{i + 1}" for i, c in enumerate(self.contrasts))


def _p_text(p: float) -> str:
    return "p < 0.0001" if p < 0.0001 else f"p = {p:.4f}"


@dataclass(frozen=True)
class ContrastResult:
    """One contrast on one measure: the paired differences' mean with its 95% interval (``n``
    paired seeds), their SD, the t statistic and two-sided p-value (NaN under 2 paired seeds),
    the Holm level it was tested at, whether it was rejected, and its verdict."""

    name: str
    method: str
    baseline: str
    interval: Interval
    sd: float
    t: float
    p: float
    level: float
    rejected: bool
    verdict: str
    note: str = ""

    @property
    def n(self) -> int:
        return self.interval.n

    def text(self, decided: bool = True) -> str:
        """``C1 A − B = +0.0123 [+0.0040, +0.0206] (20 paired seeds, p = 0.0041, Holm level
        0.025): supported``; without ``decided``, the description only (no level, no verdict)."""
        i = self.interval
        head = f"{self.name} {self.method} − {self.baseline}"
        if i.n == 0:
            body = f"{head}: no paired seeds"
        else:
            seeds = f"{i.n} paired seed{'' if i.n == 1 else 's'}"
            if i.n < 2:
                body = f"{head} = {i.mean:+.4f} ({seeds}, no test)"
            else:
                level = f", Holm level {self.level:.4g}" if decided else ""
                body = f"{head} = {i.mean:+.4f} [{i.low:+.4f}, {i.high:+.4f}] ({seeds}, {_p_text(self.p)}{level})"
        note = f" ({self.note})" if self.note else ""
        return f"{body}: {self.verdict}{note}" if decided else body


@dataclass(frozen=True)
class ContrastOutcome:
    """What a :class:`ContrastRule` gives on one measure: each contrast's result, in the rule's
    order."""

    rule: ContrastRule
    column: str
    results: tuple[ContrastResult, ...]
    # The learning check: the learning_check arm's gain over the run (None without the check).
    learning: Interval | None = None
    # Mean training ETR per arm, where known (the etr_margin check reads it).
    etr: Mapping[str, float] | None = None

    @property
    def learned(self) -> bool:
        """Whether the learning check passed (True without one)."""
        return self.learning is None or (self.learning.n >= 2 and self.learning.low > 0)

    @property
    def text(self) -> str:
        """The verdicts joined: ``C1 bots-embed − random: supported; C2 bots − random: inconclusive``."""
        return "; ".join(
            f"{r.name} {r.method} − {r.baseline}: {r.verdict}{f' ({r.note})' if r.note else ''}" for r in self.results
        )

    def checks(self) -> list[str]:
        """The gating checks as lines (empty without them)."""
        rule, out = self.rule, []
        if rule.learning_check is not None and self.learning is not None:
            gain = self.learning
            state = "passed" if self.learned else "failed: no contrast is read"
            out.append(
                f"Learning check: {rule.learning_check}'s gain over the run (mean after step 0 minus step 0) = "
                f"{gain.text(digits=4)} ({gain.n} seeds), interval above 0 required: {state}."
            )
        if rule.etr_margin is not None and rule.learning_check is not None:
            if not self.etr or rule.learning_check not in self.etr:
                out.append("ETR check: the runs' training ETR is not known here; not applied.")
            else:
                base = self.etr[rule.learning_check]
                parts = [
                    f"{m} {self.etr[m]:.3f} ({self.etr[m] - base:+.3f})"
                    for m in dict.fromkeys(c.method for c in rule.contrasts)
                    if m in self.etr and m != rule.learning_check
                ]
                out.append(
                    f"ETR check (mean training ETR over the run; {rule.learning_check} {base:.3f}; a method at or "
                    f"below +{rule.etr_margin:g} over it did not change what it trained on): {', '.join(parts)}."
                )
        return out

    def line(self) -> str:
        """The outcome in one line (:attr:`text`)."""
        return self.text


def _gain(rows: Rows, arm: str, column: str) -> Interval:
    """``arm``'s gain over the run on ``column``: per seed, the mean of its evaluations after step
    0 minus its step-0 evaluation."""
    gains = []
    for seed_rows in _runs(rows).get(arm, {}).values():
        by_step = {int(r["step"]): _number(r.get(column)) for r in seed_rows}
        start, later = by_step.get(0), [v for s, v in by_step.items() if s > 0 and v is not None]
        if start is not None and later:
            gains.append(float(np.mean(later)) - start)
    return Interval.of(gains)


def decide_contrasts(
    rows: Rows, rule: ContrastRule, column: str | None = None, etr: Mapping[str, float] | None = None
) -> ContrastOutcome:
    """The rule's verdict on each contrast on ``column`` (default: the primary metric's) averaged
    over each run: the differences over the seeds both arms have, their mean, SD and 95% t
    interval, the two-sided paired t-test, Holm's step-down over the contrasts' p-values at
    ``rule.alpha``, then in this order: rejected with mean above 0 "supported", below 0
    "harmful"; the interval inside ±``rule.equivalence`` "does not matter at this scale"; else
    "inconclusive". Fewer than 2 paired seeds test nothing (inconclusive). With the rule's
    ``learning_check`` failing, every verdict is "not read"; with its ``etr_margin``, ``etr`` (mean
    training ETR per arm) notes each contrast whose method stayed within the margin."""
    column = column or primary_column(rows)
    _schedule(rows)
    over = _per_run(rows, column, "mean")
    for name, c in zip(rule.names, rule.contrasts):
        for role in ("method", "baseline"):
            arm = getattr(c, role)
            if arm not in over:
                raise InvalidArgumentError(
                    f"rule: the {role} {arm!r} of {name} has no runs among {sorted(over)}", "rule"
                )
    stats = []
    for c in rule.contrasts:
        a, b = over[c.method], over[c.baseline]
        diffs = np.asarray([a[s] - b[s] for s in a if s in b and a[s] == a[s] and b[s] == b[s]], dtype=np.float64)
        interval = Interval.of(diffs)
        sd, t, p = math.nan, math.nan, math.nan
        if diffs.size >= 2:
            sd = float(np.std(diffs, ddof=1))
            if sd > 0:
                t = interval.mean / (sd / math.sqrt(diffs.size))
            else:  # no spread: every difference the same
                t = math.copysign(math.inf, interval.mean) if interval.mean != 0 else 0.0
            p = t_test_p(t, diffs.size - 1)
        stats.append((interval, sd, t, p))
    tested = holm((p for _, _, _, p in stats), rule.alpha)
    learning = None
    if rule.learning_check is not None:
        if rule.learning_check not in over:
            raise InvalidArgumentError(
                f"rule: the learning_check {rule.learning_check!r} has no runs among {sorted(over)}", "rule"
            )
        learning = _gain(rows, rule.learning_check, column)
    learned = learning is None or (learning.n >= 2 and learning.low > 0)
    results = []
    for name, c, (interval, sd, t, p), (level, rejected) in zip(rule.names, rule.contrasts, stats, tested):
        note = ""
        arm = rule.learning_check
        if rule.etr_margin is not None and etr and arm is not None and arm in etr and c.method in etr:
            gap = etr[c.method] - etr[arm]
            if c.method != arm and gap <= rule.etr_margin:
                note = (
                    f"{c.method} did not change what it trained on: mean training ETR {etr[c.method]:.3f}, "
                    f"{gap:+.3f} over {arm}'s, within {rule.etr_margin:g}"
                )
        if not learned:
            verdict = NOT_READ
        elif rejected and interval.mean > 0:
            verdict = SUPPORTED
        elif rejected and interval.mean < 0:
            verdict = HARMFUL
        elif interval.n >= 2 and -rule.equivalence <= interval.low and interval.high <= rule.equivalence:
            verdict = DOES_NOT_MATTER
        else:
            verdict = UNDECIDED
        results.append(ContrastResult(name, c.method, c.baseline, interval, sd, t, p, level, rejected, verdict, note))
    return ContrastOutcome(rule, column, tuple(results), learning, etr)


def reference_cost(refs: ReferenceSpec, tasks: int) -> int:
    """Rollouts the two references cost: each measured with ``refs.rollouts`` samples on each of
    ``tasks`` training tasks."""
    return 2 * int(tasks) * int(refs.rollouts)


def _measure_name(column: str) -> str:
    return f"avg@{column.removeprefix('avg_at_')}" if column.startswith("avg_at_") else column


def _steps_text(steps: list[int]) -> str:
    if len(steps) > 4 and len({b - a for a, b in zip(steps, steps[1:])}) == 1:
        return f"{steps[0]}, {steps[1]}, …, {steps[-1]}"
    return ", ".join(map(str, steps))


def _information_of(m: str, reads_references: Collection[str], reads_embeddings: Collection[str]) -> str:
    if m in reads_references:
        return "reference pass rates"
    return "task embeddings" if m in reads_embeddings else "own rollouts only"


def trial_markdown(
    rows: Rows,
    rule: DecisionRule | ContrastRule | None = None,
    *,
    reads_references: Collection[str] = (),
    reference_rollouts: int = 0,
    caveat: str = "",
    reads_embeddings: Collection[str] = (),
    etr: Mapping[str, float] | None = None,
) -> str:
    """The primary metric per method and paired against the baseline, as markdown: per method its
    seeds, the primary metric, greedy accuracy over the run, final accuracy (each mean ± 95%
    half-width over seeds), the rollouts it spent, the reference rollouts charged to it (when it
    is in ``reads_references``) and their total; then each method minus the baseline (and the
    rule's method minus its control) paired by seed; then, with a ``rule``, its outcome on the
    primary metric and, as a secondary, on greedy accuracy (each outcome line starting with
    ``caveat``, e.g. that the runs were too small to count). With a :class:`ContrastRule`, the
    differences are each method minus the baseline (random, else the first method) and each of
    its contrasts, the outcome lists every contrast and its verdict, and greedy accuracy is
    described with the same arithmetic but not decided; ``etr`` (mean training ETR per method) is
    what a rule's ``etr_margin`` reads."""
    if not rows:
        return "No held-out evaluations."
    steps = _schedule(rows)
    primary = primary_column(rows)
    name = _measure_name(primary)
    has_greedy = primary != "greedy" and any(r.get("greedy") is not None for r in rows)
    measures = [(f"{name} over the run (primary)", primary, "mean")]
    if has_greedy:
        measures.append(("greedy over the run", "greedy", "mean"))
    measures.append((f"final {name}", primary, "final"))
    values = {(column, how): _per_run(rows, column, how) for _, column, how in measures}
    spent = _per_run(rows, "rollouts", "final")
    methods = list(spent)
    single = rule if isinstance(rule, DecisionRule) else None
    baseline = single.baseline if single else ("random" if "random" in methods else methods[0])
    control = single.control if single else ("reference-filter" if "bots" in methods else None)
    subject = single.method if single else "bots"

    seen = [m for m in methods if m in reads_references]
    embedded = [m for m in methods if m in reads_embeddings and m not in reads_references]
    blind = [m for m in methods if m not in reads_references and m not in embedded]
    info = []
    if seen:
        charged = f" ({reference_rollouts:,} reference rollouts charged to each)" if reference_rollouts else ""
        info.append(f"the reference pass rates for {', '.join(seen)}{charged}")
    if embedded:
        info.append(
            f"task embeddings for {', '.join(embedded)} (one prefill of every training prompt; no rollouts charged)"
        )
    if blind:
        info.append(f"nothing for {', '.join(blind)}")
    lines = [
        f"Primary metric: each run's mean held-out {name} over its {len(steps)} evaluations (steps "
        f"{_steps_text(steps)}; every run on the same schedule), mean ± 95% Student-t half-width over seeds. "
        f"What each method had besides its rollouts: {'; '.join(info)}.",
        "",
        "| Method | information | seeds | "
        + " | ".join(title for title, _, _ in measures)
        + " | rollouts spent | reference rollouts charged | charged total |",
        "|---|---|---:|" + "---:|" * (len(measures) + 3),
    ]
    for m in methods:
        charge = reference_rollouts if m in reads_references else 0
        cells = [Interval.of(values[(c, how)][m].values()).text(signed=False) for _, c, how in measures]
        used = list(spent[m].values())
        lines.append(
            f"| {m} | {_information_of(m, reads_references, embedded)} | {len(used)} | "
            + " | ".join(cells)
            + f" | {Interval.of(used).text(digits=0, signed=False)} | {charge:,} "
            f"| {Interval.of(u + charge for u in used).text(digits=0, signed=False)} |"
        )
    pairs = [(m, baseline) for m in methods if m != baseline]
    if isinstance(rule, ContrastRule):
        pairs += [
            (c.method, c.baseline)
            for c in rule.contrasts
            if c.method in methods and c.baseline in methods and (c.method, c.baseline) not in pairs
        ]
    elif control in methods and subject in methods and control != baseline:
        pairs.append((subject, control))
    if pairs:
        lines += [
            "",
            "Paired by seed (each seed's run minus the other method's run of the same seed; mean ± 95% "
            "half-width, * where the interval excludes 0):",
            "",
            "| Difference | paired seeds | " + " | ".join(title for title, _, _ in measures) + " |",
            "|---|---:|" + "---:|" * len(measures),
        ]
        for a, b in pairs:
            diffs = [paired_interval(values[(c, how)][a], values[(c, how)][b]) for _, c, how in measures]
            lines.append(f"| {a} − {b} | {diffs[0].n} | " + " | ".join(i.text(mark=True) for i in diffs) + " |")
    if isinstance(rule, ContrastRule):
        lines += _contrast_lines(rows, rule, name, has_greedy, caveat, etr)
    elif rule is not None:
        lines += [
            "",
            f"{caveat}Outcome under the rule ({name} over the run, the primary metric): {decide(rows, rule).line()}.",
        ]
        if has_greedy:
            lines.append(f"{caveat}Secondary (greedy over the run): {decide(rows, rule, 'greedy').line()}.")
    return "\n".join(lines)


def _contrast_lines(
    rows: Rows, rule: ContrastRule, name: str, has_greedy: bool, caveat: str, etr: Mapping[str, float] | None
) -> list[str]:
    """The outcome of a :class:`ContrastRule` on the primary metric: its gating checks, one
    contrast a line, the verdicts joined; then greedy accuracy described the same way, not
    decided."""
    outcome = decide_contrasts(rows, rule, etr=etr)
    checks = outcome.checks()
    m = len(rule.contrasts)
    lines = [
        "",
        f"{caveat}Outcome under the rule ({name} over the run, the primary metric; each contrast's differences "
        f"paired by seed with a 95% Student-t interval and a two-sided paired t-test, Holm's step-down over the "
        f'{m} contrast{"" if m == 1 else "s"} at family-wise α = {rule.alpha:g}; "does not matter at this scale" '
        f"where the interval lies inside ±{rule.equivalence:g}):",
        "",
        *(f"- {r.text()}" for r in outcome.results),
        *(["", *checks] if checks else []),
        "",
        f"{caveat}Outcome: {outcome.text}.",
    ]
    if has_greedy:
        lines += [
            "",
            f"{caveat}Secondary (greedy over the run; described, not decided):",
            "",
            *(f"- {r.text(decided=False)}" for r in decide_contrasts(rows, rule, "greedy").results),
        ]
    return lines
