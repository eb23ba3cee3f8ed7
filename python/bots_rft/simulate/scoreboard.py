"""The scoreboard: BOTS against every peer, in several regimes, with the same or different
information, on three axes (per training step, per rollout spent, per modelled wall-clock).

A *regime* is a simulated world and run length (pool size and epochs, drift, reference noise,
and the learner's sensitivity settings). An *information setting* says who reads the weak/strong
reference pass rates (:data:`SCOREBOARD_INFORMATION`): "paper" (each method as published),
"shared" (every method that can use them: DPS and Knapsack-RL start from them), "none" (none
does) and "charged" (the runs of "paper", but every row that read the references starts its
rollout and wall-clock axes at what measuring them costs: :func:`reference_rollouts` rollouts,
generated in calls of batch x n rollouts). Every entrant runs on every seed of every regime under
each setting; a run whose method reads the same information in two settings is run once and
reused ("charged" adds no run: it is "paper" on other x-axes).

The learner (:class:`~bots_rft.simulate.learner.LearnerConfig`) here differs from the paper
reproduction's in two settings, both stated in the output: ``group_noise = 4`` (a group of n
rollouts counts n / (n + 4) of its signal, so group size matters) and ``repeat_decay = 1`` (a
prompt trained on again teaches as much as the first time: the peers' papers train for many
epochs on 7.5k-25k prompts and keep improving); and it takes the settings fitted to the real
trainer from :mod:`bots_rft.simulate.fitted` (the step rule, its saturation, trajectory noise,
learning rate). The regimes "repeat-penalty", "no-group-noise" and "linear-rule" rerun the
7,500-task pool with the first two set back and with the old learner (progress linear in the
batch-mean signal), as sensitivity.

Modelled wall-clock, in units of one plain GRPO step (one generation call of batch x n rollouts,
then training on them): a generation call costs a fixed 0.35 (the slowest response of the call
decides its length) plus 0.35 per batch x n rollouts it generates; training costs 0.30 per
batch x n rollouts trained on. A method that samples in sequential rounds pays the fixed part per
round; SPEED-RL's step that trains on its queue pays only training.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

import numpy as np
import numpy.typing as npt
from pydantic import ConfigDict, SkipValidation, field_validator

from ..config_files import ConfigModel, Int, Invalid
from ..errors import ConfigError
from ..metrics import best_so_far, mean_ci, rollout_axis, time_to_baseline
from ..selector.registry import method
from .experiment import INFORMATION, MethodSpec, RunRecord, SimConfig, reads_references, run_method
from .fitted import FITTED_LEARNER
from .learner import LINEAR_LEARNING_RATE, LearnerConfig, make_world

__all__ = [
    "Regime",
    "Entrant",
    "ScoreboardConfig",
    "REGIMES",
    "ENTRANTS",
    "SCOREBOARD_LEARNER",
    "SCOREBOARD_INFORMATION",
    "CHARGED",
    "AXES",
    "METRICS",
    "OURS",
    "scoreboard_config",
    "run_scoreboard",
    "ScoreboardResult",
    "wall_clock",
    "reference_rollouts",
    "reference_charge",
    "run_axis",
]

FloatArray = npt.NDArray[np.float64]

#: The learner settings every regime starts from (module docstring): the scoreboard's own two and
#: the ones fitted to the real trainer (:data:`~bots_rft.simulate.fitted.FITTED_LEARNER`).
SCOREBOARD_LEARNER: dict[str, Any] = {"group_noise": 4.0, "repeat_decay": 1.0, **FITTED_LEARNER.settings()}
#: The learner before the fit (the "linear-rule" regime): the linear step rule at its step size and
#: no trajectory noise.
OLD_RULE: dict[str, Any] = {
    "step_rule": "linear",
    "learning_rate": LINEAR_LEARNING_RATE,
    "trajectory_noise": 0.0,
}
#: The setting that charges the reference pass rates' cost (module docstring).
CHARGED = "charged"
#: The information settings of the scoreboard: the simulator's, and "charged".
SCOREBOARD_INFORMATION = (*INFORMATION, CHARGED)
#: Modelled wall-clock of a generation call (fixed part, and per batch x n rollouts generated)
#: and of training (per batch x n rollouts trained on), in units of one plain GRPO step.
ROUND_LATENCY, GENERATION, TRAINING = 0.35, 0.35, 0.30
AXES = ("step", "rollout", "wallclock")
#: The rows of this package: paired.csv compares each of them with every other row.
OURS = ("BOTS", "BOTS-Embed", "BOTS-Screen", "BOTS-Screen 4x")
#: Metric name -> (kind, level): TTB at a share of Random's gain, BSF within a share of its budget.
METRICS: dict[str, tuple[str, float]] = {"ttb_50": ("ttb", 0.5), "ttb_100": ("ttb", 1.0), "bsf_100": ("bsf", 1.0)}


@dataclass(frozen=True)
class Regime:
    """One world and run length of the scoreboard."""

    name: str
    summary: str
    learner: LearnerConfig
    steps: int
    batch_size: int = 256

    @property
    def epochs(self) -> float:
        """Picks over the run divided by the pool size (about how often a task comes back)."""
        return self.steps * self.batch_size / self.learner.num_tasks


@dataclass(frozen=True)
class Entrant:
    """One row: a method of the method table with the settings of one paper."""

    label: str
    kind: str
    extra: tuple[tuple[str, Any], ...] = ()
    note: str = ""

    def spec(self, information: str) -> MethodSpec:
        """The run of this row under ``information`` (its key says whether it read the references);
        under "charged", its run under "paper"."""
        base = MethodSpec(self.kind, extra=self.extra)
        if method(self.kind).references == "unused":
            return base
        return replace(base, references=reads_references(base, _selection(information)))

    def runs_under(self, information: str) -> bool:
        return not (information == "none" and method(self.kind).references == "required")

    def charged(self, information: str) -> bool:
        """Whether this row pays for the references on the rollout and wall-clock axes: under
        "charged", when its run read them."""
        return information == CHARGED and bool(self.spec(information).references)


def _selection(information: str) -> str:
    """The simulator's setting whose selection ``information`` uses ("charged" selects as "paper")."""
    return "paper" if information == CHARGED else information


def _learner(**changes: Any) -> LearnerConfig:
    return LearnerConfig(**{**SCOREBOARD_LEARNER, **changes})


#: The regimes (full size; --quick scales pools, steps and batch down).
REGIMES: tuple[Regime, ...] = (
    Regime("paper-54k", "the paper's pool: 54,400 tasks, 100 steps (0.47 epoch)", _learner(), 100),
    Regime("math-7.5k", "a MATH-sized pool: 7,500 tasks, 100 steps (3.4 epochs)", _learner(num_tasks=7_500), 100),
    Regime("dapo-25k", "DAPO-Math scale: 25,000 tasks, 200 steps (2 epochs)", _learner(num_tasks=25_000), 200),
    Regime(
        "drift",
        "7,500 tasks; at step 50 every skill drops by 1 logit (forgetting), so old evidence is stale",
        _learner(num_tasks=7_500, shift_step=50, shift=-1.0),
        100,
    ),
    Regime(
        "noisy-refs",
        "7,500 tasks; reference pass rates from 4 rollouts each and far noisier per task",
        _learner(num_tasks=7_500, ref_rollouts=4, ref_task_noise=3.0),
        100,
    ),
    Regime(
        "repeat-penalty",
        "sensitivity: 7,500 tasks with a repeated prompt teaching 0.8x less each time (repeat_decay 0.8)",
        _learner(num_tasks=7_500, repeat_decay=0.8),
        100,
    ),
    Regime(
        "no-group-noise",
        "sensitivity: 7,500 tasks with the group size not mattering (group_noise 0)",
        _learner(num_tasks=7_500, group_noise=0.0),
        100,
    ),
    Regime(
        "linear-rule",
        "sensitivity: 7,500 tasks with the old learner, progress linear in the batch-mean signal "
        f"(step_rule linear, learning_rate {OLD_RULE['learning_rate']:g}, trajectory_noise 0)",
        _learner(num_tasks=7_500, **OLD_RULE),
        100,
    ),
)

#: The rows, with each peer paper's own DAPO as a named row.
ENTRANTS: tuple[Entrant, ...] = (
    Entrant("Random", "random", note="uniform GRPO batches, B x n rollouts"),
    Entrant("BOTS", "bots", note="this package; reads the references unless the setting is 'none'"),
    Entrant(
        "BOTS-Embed",
        "bots-embed",
        note="this package; no references in any setting: a logistic regression of its own rollouts' success "
        "rates on task embeddings predicts every task",
    ),
    Entrant(
        "BOTS-Sim",
        "bots-sim",
        note="this package; no references in any setting: its rollouts' rates spread to the nearest tasks in "
        "embedding space",
    ),
    Entrant(
        "BOTS-Screen",
        "bots-screen",
        note="BOTS proposing, SPEED-RL's screen (4 + 12 rollouts, generation batch 1x) filtering",
    ),
    Entrant(
        "BOTS-Screen 4x",
        "bots-screen",
        (("gen_ratio", 4.0),),
        "the same with a 4x generation batch (fewer, larger generation calls)",
    ),
    Entrant("DAPO-DS 3x", "dynamic", (("oversample", 3.0),), "dynamic sampling, generation batch 3x (this package's)"),
    Entrant("DAPO-DS 1.5x", "dynamic", (("oversample", 1.5),), "generation batch 1.5x (GRESO paper's baseline)"),
    Entrant(
        "DAPO-DS 1x",
        "dynamic",
        (("oversample", 1.0), ("max_rounds", 4)),
        "generation batch 1x, at most 4 calls (DPS paper's baseline)",
    ),
    Entrant("GRESO", "greso", note="pre-rollout skip of zero-variance prompts, 1.5x rounds"),
    Entrant("SPEED-RL 1x", "speed", note="4 screening + 12 rollouts, generation batch 1x (its yaml)"),
    Entrant("SPEED-RL 4x", "speed", (("gen_ratio", 4.0),), "generation batch 4x (its shipped scripts)"),
    Entrant("DPS", "dps", note="per-prompt HMM; blind start unless the setting is 'shared'"),
    Entrant("Knapsack-RL", "knapsack", note="rollouts per prompt by knapsack; blind start unless 'shared'"),
    Entrant("Reinforce-Ada", "reinforce-ada", note="rounds of 8 until balanced; trains on a balanced 4"),
    Entrant("AdaRFT", "adarft", note="target difficulty from the strong reference (needs references)"),
)


class ScoreboardConfig(ConfigModel):
    """The matrix ``bots scoreboard`` runs: regimes x information settings x entrants, each on
    ``seeds``. A bad value is one :class:`~bots_rft.errors.ConfigError` line naming the key."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    # The regimes and rows are this module's own (frozen dataclasses, built above), taken as given.
    regimes: Annotated[tuple[Regime, ...], SkipValidation] = REGIMES
    entrants: Annotated[tuple[Entrant, ...], SkipValidation] = ENTRANTS
    information: tuple[str, ...] = SCOREBOARD_INFORMATION
    seeds: tuple[Int, ...] = tuple(range(8))
    quick: bool = False

    @field_validator("seeds")
    @classmethod
    def _seeds_for_intervals(cls, seeds: tuple[int, ...]) -> tuple[int, ...]:
        if len(seeds) < 2 or len(set(seeds)) != len(seeds) or min(seeds) < 0:
            raise Invalid("need at least 2 distinct seeds >= 0 for intervals")
        return seeds

    @field_validator("information")
    @classmethod
    def _known_information(cls, information: tuple[str, ...]) -> tuple[str, ...]:
        if not information or any(i not in SCOREBOARD_INFORMATION for i in information):
            raise Invalid(f"expected some of {list(SCOREBOARD_INFORMATION)}")
        return information

    @field_validator("entrants")
    @classmethod
    def _random_first(cls, entrants: tuple[Entrant, ...]) -> tuple[Entrant, ...]:
        if not entrants or entrants[0].kind != "random":
            raise ConfigError("entrants: the first row must be Random (every ratio is against it)")
        return entrants


def _quick(regime: Regime) -> Regime:
    """A regime shrunk for tests: a 20th of the pool (at least 400), 20 steps of 32."""
    tasks = max(400, regime.learner.num_tasks // 20)
    shift_step = min(regime.learner.shift_step, 10)
    learner = replace(regime.learner, num_tasks=tasks, eval_tasks=512, shift_step=shift_step)
    return replace(regime, learner=learner, steps=20, batch_size=32)


def scoreboard_config(*, quick: bool = False, seeds: int | None = None) -> ScoreboardConfig:
    """The full matrix, or with ``quick`` the same matrix on small pools and few steps."""
    n_seeds = seeds if seeds is not None else (3 if quick else 8)
    if isinstance(n_seeds, bool) or not isinstance(n_seeds, int) or n_seeds < 2:
        raise ConfigError(f"seeds: need an integer >= 2, got {n_seeds!r}")
    regimes = tuple(_quick(r) for r in REGIMES) if quick else REGIMES
    return ScoreboardConfig(regimes=regimes, seeds=tuple(range(n_seeds)), quick=quick)


def wall_clock(rec: RunRecord, unit: float) -> FloatArray:
    """Modelled wall-clock before each evaluation (module docstring), in plain GRPO steps."""
    per_step = ROUND_LATENCY * rec.rounds + GENERATION * rec.rollouts / unit + TRAINING * rec.trained / unit
    return rollout_axis(per_step)


def _unit(regime: Regime) -> float:
    """One plain GRPO step's rollouts (batch x n): the unit of the rollout and wall-clock axes."""
    return float(regime.batch_size * regime.learner.n_rollouts)


def reference_rollouts(learner: LearnerConfig) -> int:
    """Rollouts that measuring the two reference pass rates costs: 2 x tasks x ref_rollouts."""
    return 2 * learner.num_tasks * learner.ref_rollouts


def reference_charge(regime: Regime, axis: str) -> float:
    """What measuring the references costs on ``axis``, in that axis's units: on the rollout axis
    :func:`reference_rollouts` / (batch x n); on the wall-clock axis the generation cost of those
    rollouts in calls of batch x n rollouts each (fixed part per call, plus per rollout: module
    docstring); nothing per training step."""
    rollouts, unit = reference_rollouts(regime.learner), int(_unit(regime))
    if axis == "rollout":
        return rollouts / unit
    if axis == "wallclock":
        return ROUND_LATENCY * -(-rollouts // unit) + GENERATION * rollouts / unit
    return 0.0


def _axis(rec: RunRecord, axis: str, unit: float, start: float = 0.0) -> FloatArray:
    if axis == "step":
        return np.arange(rec.perf.size, dtype=np.float64)
    if axis == "rollout":
        return rollout_axis(rec.rollouts / unit, start)
    return start + wall_clock(rec, unit)


def _start(regime: Regime, information: str, entrant: Entrant, axis: str) -> float:
    return reference_charge(regime, axis) if entrant.charged(information) else 0.0


def run_axis(regime: Regime, information: str, entrant: Entrant, rec: RunRecord, axis: str) -> FloatArray:
    """The x-axis the scoreboard measures ``rec`` (a run of ``entrant`` in ``regime``) on under
    ``information``: under "charged" a row that read the references starts at their cost."""
    return _axis(rec, axis, _unit(regime), _start(regime, information, entrant, axis))


def _metric(name: str, x: FloatArray, y: FloatArray, bx: FloatArray, by: FloatArray) -> float | None:
    kind, level = METRICS[name]
    if kind == "ttb":
        return time_to_baseline(x, y, bx, by, (level,))[0]
    return best_so_far(x, y, bx, by, (level,))[0]


@dataclass
class ScoreboardResult:
    config: ScoreboardConfig
    #: (regime, run key, seed) -> the run
    runs: dict[tuple[str, str, int], RunRecord]
    seconds: float = 0.0
    #: rows of scoreboard.csv and paired.csv
    rows: list[dict[str, Any]] = field(default_factory=list)
    paired: list[dict[str, Any]] = field(default_factory=list)
    #: per (regime, information, label): run key, and the diagnostics of the peers' mechanisms
    keys: dict[tuple[str, str, str], str] = field(default_factory=dict)


def _values(
    result: ScoreboardResult, regime: Regime, key: str, base_key: str, axis: str, name: str, start: float = 0.0
) -> list[float | None]:
    """``name`` of run ``key`` against Random's run ``base_key`` on each seed, the run's x-axis
    starting at ``start`` (a charge for the references; Random's at 0). A run whose charge alone
    exceeds Random's whole budget has no evaluation within it: BSF is None, as for any budget a
    curve does not reach, and so is TTB when the target is never reached."""
    unit = _unit(regime)
    out = []
    for seed in result.config.seeds:
        rec, base = result.runs[(regime.name, key, seed)], result.runs[(regime.name, base_key, seed)]
        out.append(
            _metric(name, _axis(rec, axis, unit, start), rec.perf, _axis(base, axis, unit), base.perf)
            if name in METRICS
            else float(rec.perf[-1] - base.perf[-1])
        )
    return out


def _summary(values: list[float | None]) -> tuple[float, float, float, int]:
    """mean, lo, hi over the seeds that reached it, and how many did (NaN mean: none)."""
    got = [v for v in values if v is not None and not math.isnan(v)]
    if not got:
        return math.nan, math.nan, math.nan, 0
    mean, half = mean_ci(np.asarray(got))
    return float(mean), float(mean - half), float(mean + half), len(got)


def _tabulate(result: ScoreboardResult) -> None:
    """scoreboard.csv's rows, and paired.csv's: each of :data:`OURS` against every other row, seed
    by seed."""
    memo: dict[tuple[str, str, str, str, str, float], list[float | None]] = {}

    def values(regime: Regime, key: str, base_key: str, axis: str, name: str, start: float) -> list[float | None]:
        """:func:`_values`, once per cell: BOTS's own values serve every peer's paired row, and a
        row's "paper" values its "charged" ones wherever it is not charged."""
        cell = (regime.name, key, base_key, axis, name, start)
        if cell not in memo:
            memo[cell] = _values(result, regime, key, base_key, axis, name, start)
        return memo[cell]

    cfg = result.config
    base_label = cfg.entrants[0].label
    by_label = {e.label: e for e in cfg.entrants}
    for regime in cfg.regimes:
        for info in cfg.information:
            base_key = result.keys[(regime.name, info, base_label)]
            ours = [
                (label, result.keys.get((regime.name, info, label)), by_label.get(label))
                for label in OURS
                if label in by_label
            ]
            for entrant in cfg.entrants:
                key = result.keys.get((regime.name, info, entrant.label))
                if key is None:
                    continue
                for axis in AXES:
                    for name in (*METRICS, "final_vs_random"):
                        if name == "final_vs_random" and axis != "step":
                            continue
                        vals = values(regime, key, base_key, axis, name, _start(regime, info, entrant, axis))
                        mean, lo, hi, n = _summary(vals)
                        result.rows.append(
                            dict(
                                regime=regime.name,
                                information=info,
                                method=entrant.label,
                                axis=axis,
                                metric=name,
                                mean=mean,
                                lo=lo,
                                hi=hi,
                                seeds=n,
                            )
                        )
                        if name == "final_vs_random":
                            continue
                        for our_label, our_key, our in ours:
                            if our_key is None or our is None or our_label == entrant.label:
                                continue
                            result.paired.append(
                                _paired(
                                    our_label,
                                    entrant.label,
                                    name,
                                    vals,
                                    values(regime, our_key, base_key, axis, name, _start(regime, info, our, axis)),
                                )
                                | dict(regime=regime.name, information=info, axis=axis)
                            )


def _paired(ours: str, peer: str, name: str, theirs: list[float | None], mine: list[float | None]) -> dict[str, Any]:
    """``ours`` against ``peer`` seed by seed on metric ``name`` (positive: ours better; a seed
    counts only where both reached the level)."""
    sign = 1.0 if METRICS[name][0] == "ttb" else -1.0  # TTB: peer - ours; BSF: ours - peer
    diffs: list[float | None] = [
        sign * (p - b)
        for b, p in zip(mine, theirs)
        if b is not None and p is not None and not (math.isnan(b) or math.isnan(p))
    ]
    mean, lo, hi, n = _summary(diffs)
    verdict = "n/a" if n < 2 else "ahead" if lo > 0 else "behind" if hi < 0 else "level"
    return dict(method=ours, peer=peer, metric=name, mean=mean, lo=lo, hi=hi, seeds=n, verdict=verdict)


def run_scoreboard(config: ScoreboardConfig, on_run: Callable[[str], object] | None = None) -> ScoreboardResult:
    """Run every distinct (regime, entrant run, seed) once; ``on_run(description)`` after each."""
    import time

    start = time.perf_counter()
    result = ScoreboardResult(config, {})
    keys, specs = _plan(config)
    for regime in config.regimes:
        result.keys.update({(regime.name, info, label): key for (info, label), key in keys.items()})
        sim = SimConfig(
            learner=regime.learner,
            steps=regime.steps,
            batch_size=regime.batch_size,
            seeds=config.seeds,
            methods=("random",),
        )
        for seed in config.seeds:
            world = make_world(regime.learner, seed)
            for key, spec in specs.items():
                result.runs[(regime.name, key, seed)] = run_method(spec, world, seed, sim)
                if on_run is not None:
                    on_run(f"{regime.name} seed={seed} {key}")
    _tabulate(result)
    result.seconds = time.perf_counter() - start
    return result


def _plan(config: ScoreboardConfig) -> tuple[dict[tuple[str, str], str], dict[str, MethodSpec]]:
    """Each (information, row)'s run key, and each distinct run: a run whose method reads the same
    information in two settings is one run."""
    keys: dict[tuple[str, str], str] = {}
    specs: dict[str, MethodSpec] = {}
    for info in config.information:
        for entrant in config.entrants:
            if entrant.runs_under(info):
                spec = entrant.spec(info)
                keys[(info, entrant.label)] = spec.key
                specs.setdefault(spec.key, spec)
    return keys, specs


def count_runs(config: ScoreboardConfig) -> int:
    """How many runs :func:`run_scoreboard` makes (for a progress bar)."""
    return len(_plan(config)[1]) * len(config.regimes) * len(config.seeds)
