"""Run task selectors against the simulated learner and collect the paper's measurements.

An experiment is a set of *groups* (the paper's tables: method comparison, ρ sweep, λ sweep,
sampling on/off), each a list of labelled :class:`MethodSpec`. Every distinct spec runs once per
seed, whatever the number of groups it appears in; all methods of one seed share the same world
(tasks, reference pass rates, held-out set).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import BotsError, ConfigError
from ..metrics import effective_probability, effective_ratios, pearson, rate_histogram, roc_auc
from ..metrics.calibration import calibration_metrics, predicted_pass_rates
from ..parameters import (
    ADAPTIVE_LAM,
    ADAPTIVE_RHO,
    LAG_DISCOUNT,
    LAM,
    MIN_GAP,
    MOMENTUM,
    OVERSAMPLE,
    RHO,
    TARGET,
    TAU,
    THOMPSON,
    Parameter,
)
from ..selector.protocol import RollsOut, Selector
from ..selector.registry import RolloutMode, method, method_names
from .fields import documented
from .learner import LearnerConfig, SimulatedLearner, TaskWorld, make_world
from .signals import simulated_signals

__all__ = [
    "MethodSpec",
    "METHODS",
    "SimConfig",
    "RunRecord",
    "ExperimentResult",
    "build_groups",
    "run_method",
    "run_experiment",
]

FloatArray = npt.NDArray[np.float64]

#: The information settings of :attr:`SimConfig.information`.
INFORMATION = ("paper", "shared", "none")
#: Peers that take reference pass rates as a prior only in the "shared" setting (their papers
#: start every task blind).
PRIOR_PEERS = ("dps", "knapsack")

#: The methods a simulation compares, in the order of the paper's tables (Random first).
TABLE_ORDER = ("random", "offline", "mopps", "dots", "bots", "dynamic")


def _checked(param: Parameter, value: Any, argument: str | None = None) -> Any:
    """``param.check``, its error raised as the ConfigError a simulation config raises."""
    try:
        return param.check(value, argument)
    except BotsError as exc:
        raise ConfigError(str(exc)) from None


@dataclass(frozen=True)
class MethodSpec:
    """One task-selection method of :data:`bots_rft.selector.registry.METHODS` (any of its names; ``kind``
    holds the canonical one). ``lam``/``rho`` reach every method that takes them (bots and its
    variants; the presets "mopps" and "dots" fix them, as the paper's appendix E.6); ``thompson``
    is kind "bots"'s. ``target``, ``tau``,
    ``adaptive_rho`` and ``adaptive_lam`` (docs/selection-rules.md) reach the methods that take
    them; a method that does not take one ignores it."""

    kind: str
    lam: float = LAM.default
    rho: float = RHO.default
    thompson: bool = THOMPSON.default
    target: float = TARGET.default
    tau: float = TAU.default
    adaptive_rho: bool = ADAPTIVE_RHO.default
    adaptive_lam: bool = ADAPTIVE_LAM.default
    lag_discount: float = LAG_DISCOUNT.default
    # Further method parameters of this row, as (name, value) pairs (e.g. DAPO's oversample or
    # SPEED-RL's gen_ratio at a peer paper's setting); they override the experiment's.
    extra: tuple[tuple[str, Any], ...] = ()
    # Whether this run hands the method the reference pass rates (None: the experiment's
    # information setting decides; see SimConfig.information).
    references: bool | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "kind", method(self.kind, "kind").name)
        except BotsError as exc:
            raise ConfigError(str(exc)) from None
        for param in (LAM, RHO, *_RULE):
            _checked(param, getattr(self, param.name))
        m = method(self.kind)
        for name, value in self.extra:
            try:
                m.param(name).check(value)
            except KeyError:
                raise ConfigError(f"extra: {name!r} is not a parameter of the {self.kind} method") from None
            except BotsError as exc:
                raise ConfigError(str(exc)) from None
        if self.references is False and m.references == "required":
            raise ConfigError(f"references: the {self.kind} method needs reference pass rates")

    @property
    def key(self) -> str:
        """Identity of the run: equal keys are the same experiment. A rule setting left at its
        default is not named: a run's key, and so its random stream, changes only with what the
        run sets, which keeps the committed tables and scoreboard (runs that set none of these)
        reproducible."""
        takes = {p.name for p in method(self.kind).params}
        # λ and ρ are named for the other methods that take them only when not at their defaults
        # (kind "bots" always names them, below), for the same reason.
        named = _RULE if self.kind == "bots" else (LAM, RHO, *_RULE)
        fixed = method(self.kind).fixed
        extra = ",".join(
            f"{p.name}={getattr(self, p.name):g}" if p.type == "float" else f"{p.name}={getattr(self, p.name)}"
            for p in named
            if p.name in takes and p.name not in fixed and getattr(self, p.name) != p.default
        )
        more = ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.extra)
        extra = ",".join(x for x in (extra, more) if x)
        if self.references is not None:
            extra = ",".join(x for x in (extra, "refs" if self.references else "no-refs") if x)
        if self.kind == "bots":
            return f"bots(lam={self.lam:g},rho={self.rho:g},thompson={self.thompson}{',' + extra if extra else ''})"
        return f"{self.kind}({extra})" if extra else self.kind


#: The selection-rule settings a spec carries beyond λ, ρ and the sampling switch.
_RULE = (TARGET, TAU, ADAPTIVE_RHO, ADAPTIVE_LAM, LAG_DISCOUNT)


#: Method names accepted by ``--methods`` (canonical; their aliases are accepted too), with their
#: table labels, in table order.
METHODS: dict[str, str] = {name: method(name).label for name in TABLE_ORDER}

PAPER_SWEEP: tuple[float, ...] = (0.0, 0.05, 0.1, 0.2, 0.5, 1.0)


@dataclass(frozen=True)
class SimConfig:
    """A whole ``bots simulate`` experiment."""

    # Each field's doc is the help of its ``bots simulate`` flag (commands/simulate.py builds the
    # flags from them); the five plain ``field``s below have flags of their own there, written by
    # hand: each is set from several flags or from a value the flag converts.
    learner: LearnerConfig = field(default_factory=LearnerConfig)
    steps: int = documented("training steps", 100, minimum=1)
    batch_size: int = documented("tasks per step, at most --tasks", 256, minimum=1, flag="--batch")
    seeds: tuple[int, ...] = (0, 1, 2)
    methods: tuple[str, ...] = tuple(METHODS)
    lam: float = documented("λ of bots and its variants (MoPPS and DOTS fix theirs), and of the ρ sweep", param=LAM)
    rho: float = documented("ρ of bots and its variants (MoPPS and DOTS fix theirs), and of the λ sweep", param=RHO)
    rho_sweep: tuple[float, ...] = documented("ρ values at λ=--lam, or 'none'", PAPER_SWEEP, param=RHO)
    lam_sweep: tuple[float, ...] = documented("λ values at ρ=--rho, or 'none'", PAPER_SWEEP, param=LAM)
    sampling_ablation: bool = documented("also run BOTS with the posterior mean instead of Thompson sampling", True)
    dapo_oversample: float = documented("DAPO generation batch as a multiple of the batch", param=OVERSAMPLE)
    min_gap: float = documented(
        "interpolation estimator: skip batches whose mean references differ by less", param=MIN_GAP
    )
    threads: int | None = 1  # BOTS core threads, None: every core (simulations are small; 1 avoids contention)
    # The selection rule of every method that takes it (docs/selection-rules.md); defaults: the paper's.
    target: float = documented("p*, the target success rate of every method that has one", param=TARGET)
    tau: float = documented("BOTS τ: 0 takes the tasks nearest p*; > 0 samples from softmax(−|θ − p*| / τ)", param=TAU)
    adaptive_rho: bool = documented(
        "BOTS: halve ρ when the estimator's predictions miss by >= 0.25", ADAPTIVE_RHO.default
    )
    adaptive_lam: bool = documented(
        "BOTS: scale λ by the learner's observed drift, within a factor 4", ADAPTIVE_LAM.default
    )
    # Further tables, off by default: BOTS with τ varied, with p* varied, and adaptive ρ/λ on/off.
    tau_sweep: tuple[float, ...] = documented(
        "also a table of BOTS with these τ values, e.g. 0,0.02,0.1", (), param=TAU
    )
    target_sweep: tuple[float, ...] = documented(
        "also a table of BOTS with these targets p*, e.g. 0.3,0.5,0.7", (), param=TARGET
    )
    adaptive_ablation: bool = documented("also a table of BOTS with adaptive ρ and/or λ on and off", False)
    # Late evidence (asynchronous trainers): the selector gets each step's rollouts `lag` steps
    # later, as evidence `lag` policy versions old (update(..., policy_lag=lag)); the learner trains
    # on them at once. Only selectors whose update takes policy_lag (the BOTS methods) see the delay.
    lag: int = documented(
        "late evidence (docs/planning.md): the BOTS methods get each step's rollouts this many steps "
        "later, as evidence that many policy versions old",
        0,
        minimum=0,
    )
    lag_discount: float = documented("δ: late evidence counts δ ** lag; 1 is no discount", param=LAG_DISCOUNT)
    lag_discount_sweep: tuple[float, ...] = documented(
        "also a table of BOTS under --lag with these δ values, e.g. 1,0.8,0.5", (), param=LAG_DISCOUNT
    )
    # A spec's own `references` overrides the information setting for its run.
    information: str = documented(
        "which methods read the weak/strong reference pass rates: 'paper' (each as published: the BOTS "
        "family and AdaRFT read them; DPS and Knapsack-RL start every task blind), 'shared' (every method "
        "that can use them does: DPS and Knapsack-RL start from the weak reference's rate) or 'none' (no "
        "method does: BOTS runs on its explicit evidence alone; methods that need them cannot run)",
        "paper",
        choices=INFORMATION,
    )
    # Further method parameters as (name, value) pairs (``bots simulate --param NAME=VALUE``): each
    # reaches every compared method that takes it and does not fix it (e.g. AdaRFT's step_size,
    # BOTS's momentum); a name no compared method takes is refused.
    method_params: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ConfigError(f"{name} must be a positive int, got {v!r}")
        if self.batch_size > self.learner.num_tasks:
            raise ConfigError(f"batch_size={self.batch_size} exceeds num_tasks={self.learner.num_tasks}")
        if not self.seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in self.seeds):
            raise ConfigError(f"seeds must be non-negative ints, got {self.seeds!r}")
        if len(set(self.seeds)) != len(self.seeds):
            raise ConfigError(f"seeds must be distinct, got {self.seeds!r}")
        unknown = [m for m in self.methods if m not in method_names(aliases=True)]
        if unknown:
            raise ConfigError(f"methods: unknown {unknown}; known: {', '.join(METHODS)}")
        object.__setattr__(self, "methods", tuple(method(m).name for m in self.methods))
        for param in (LAM, RHO):
            _checked(param, getattr(self, param.name))
        for param in _RULE:
            _checked(param, getattr(self, param.name))
        for name, param in (("rho_sweep", RHO), ("lam_sweep", LAM), ("tau_sweep", TAU), ("target_sweep", TARGET)):
            for i, v in enumerate(getattr(self, name)):
                _checked(param, v, f"{name}[{i}]")
        _checked(OVERSAMPLE, self.dapo_oversample, "dapo_oversample")
        if isinstance(self.lag, bool) or not isinstance(self.lag, int) or self.lag < 0:
            raise ConfigError(f"lag must be an int >= 0, got {self.lag!r}")
        for i, v in enumerate(self.lag_discount_sweep):
            _checked(LAG_DISCOUNT, v, f"lag_discount_sweep[{i}]")
        _checked(MIN_GAP, self.min_gap)
        self._check_method_params()
        if self.information not in INFORMATION:
            raise ConfigError(f"information: expected one of {list(INFORMATION)}, got {self.information!r}")
        if self.information == "none":
            needing = [m for m in self.methods if method(m).references == "required"]
            if needing:
                raise ConfigError(f"information: 'none' gives no reference pass rates, which {needing} need")

    def _check_method_params(self) -> None:
        """Every ``method_params`` name is a parameter some compared method takes without fixing
        it, named once, and each value is in range for every method that takes it. λ, ρ and the
        selection rule have their own fields."""
        own = {p.name: "--" + p.name.replace("_", "-") for p in (LAM, RHO, *_RULE)}
        own |= {
            "n_rollouts": "--rollouts",
            "seed": "--seeds",
            "oversample": "--dapo-oversample",
            "min_gap": "--min-gap",
        }
        seen: set[str] = set()
        for name, value in self.method_params:
            if name in own:
                raise ConfigError(f"method_params: {name!r} has its own setting ({own[name]})")
            if name in seen:
                raise ConfigError(f"method_params: {name!r} given twice")
            seen.add(name)
            takers = [m for m in self.methods if _takes(m, name)]
            if not takers:
                raise ConfigError(f"method_params: no compared method takes {name!r} (methods: {list(self.methods)})")
            for m in takers:
                try:
                    method(m).param(name).check(value, name)
                except BotsError as exc:
                    raise ConfigError(f"method_params: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["learner"] = self.learner.to_dict()
        return d


def _rule(config: SimConfig, **changes: Any) -> dict[str, Any]:
    """The config's selection-rule settings, with ``changes``."""
    return {p.name: getattr(config, p.name) for p in _RULE} | changes


def _takes(name: str, param: str) -> bool:
    """Whether method ``name`` takes ``param`` as a parameter it does not fix."""
    m = method(name)
    return param in {p.name for p in m.params} and param not in m.fixed


def _spec_for(name: str, config: SimConfig) -> MethodSpec:
    extra = tuple((k, v) for k, v in config.method_params if _takes(name, k))
    if name == "bots":
        return MethodSpec("bots", lam=config.lam, rho=config.rho, thompson=True, **_rule(config), extra=extra)
    # A preset's spec carries the values it fixes, so that its row shows them; the experiment's λ and
    # ρ reach every other method that takes them (the BOTS variants).
    own = {k: getattr(config, k) for k in ("lam", "rho") if _takes(name, k)}
    return MethodSpec(name, **method(name).fixed, **own, **_rule(config), extra=extra)


def build_groups(config: SimConfig) -> dict[str, list[tuple[str, MethodSpec]]]:
    """The experiment's tables: group name -> [(row label, spec)], Random first in each."""
    random = ("Random", MethodSpec("random"))
    groups: dict[str, list[tuple[str, MethodSpec]]] = {
        "methods": [random] + [(method(m).label, _spec_for(m, config)) for m in config.methods if m != "random"],
    }
    if config.rho_sweep:
        groups["rho"] = [random] + [
            (f"ρ={r:g}", MethodSpec("bots", lam=config.lam, rho=r, **_rule(config))) for r in config.rho_sweep
        ]
    if config.lam_sweep:
        groups["lambda"] = [random] + [
            (f"λ={lam:g}", MethodSpec("bots", lam=lam, rho=config.rho, **_rule(config))) for lam in config.lam_sweep
        ]
    if config.sampling_ablation:
        groups["sampling"] = [
            random,
            ("sample=True", MethodSpec("bots", lam=config.lam, rho=config.rho, thompson=True, **_rule(config))),
            ("sample=False", MethodSpec("bots", lam=config.lam, rho=config.rho, thompson=False, **_rule(config))),
        ]
    if config.tau_sweep:
        groups["tau"] = [random] + [
            (f"τ={tau:g}", MethodSpec("bots", lam=config.lam, rho=config.rho, **_rule(config, tau=tau)))
            for tau in config.tau_sweep
        ]
    if config.target_sweep:
        groups["target"] = [random] + [
            (f"p*={t:g}", MethodSpec("bots", lam=config.lam, rho=config.rho, **_rule(config, target=t)))
            for t in config.target_sweep
        ]
    if config.adaptive_ablation:
        groups["adaptive"] = [random] + [
            (
                label,
                MethodSpec(
                    "bots", lam=config.lam, rho=config.rho, **_rule(config, adaptive_rho=arho, adaptive_lam=alam)
                ),
            )
            for label, arho, alam in (
                ("fixed ρ, λ", False, False),
                ("adaptive ρ", True, False),
                ("adaptive λ", False, True),
                ("adaptive ρ and λ", True, True),
            )
        ]
    if config.lag_discount_sweep:
        groups["lag"] = [random] + [
            (f"δ={d:g}", MethodSpec("bots", lam=config.lam, rho=config.rho, **_rule(config, lag_discount=d)))
            for d in config.lag_discount_sweep
        ]
    return groups


@dataclass
class RunRecord:
    """Per-step measurements of one method on one seed."""

    key: str
    seed: int
    etr: FloatArray  # [T]
    below_one: FloatArray  # [T]
    above_zero: FloatArray  # [T]
    perf: FloatArray  # [T+1] held-out score before training and after each step
    hist: npt.NDArray[np.int64]  # [T, n+1] selected tasks per empirical rate bin
    rollouts: npt.NDArray[np.int64]  # [T] rollouts spent per step
    signal: FloatArray  # [T] mean learning signal 4r(1-r) of the trained batch
    capability: FloatArray  # [T] the estimator's μ̃ after each update (NaN if none)
    # Implicit-evidence quality of the p̃ made after step t, measured at step t+1 (NaN if none).
    pearson_next: FloatArray  # [T] vs the next batch's empirical rates
    auc_next: FloatArray  # [T] effective (0<rate<1) vs not in the next batch
    pearson_true: FloatArray  # [T] vs the policy's true success probabilities on the pool
    # [T] Trinity-RFT's strict valid ratio (rate strictly inside (1/16, 15/16), see metrics).
    strict_valid: FloatArray = field(default_factory=lambda: np.zeros(0))
    # [T] Calibration of the picks (bots_rft.metrics.calibration): the posterior means at selection time
    # against the rollouts' k/n (NaN for selectors without a posterior), and the share of
    # zero-variance groups (k = 0 or k = n).
    brier: FloatArray = field(default_factory=lambda: np.zeros(0))
    ece: FloatArray = field(default_factory=lambda: np.zeros(0))
    spearman: FloatArray = field(default_factory=lambda: np.zeros(0))
    zero_variance: FloatArray = field(default_factory=lambda: np.zeros(0))
    # [T] Sequential generation calls of each step (0 for a step that trained on rollouts made
    # earlier), and the rollouts behind the groups it trained on: what a wall-clock model needs.
    rounds: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64))
    trained: FloatArray = field(default_factory=lambda: np.zeros(0))

    def to_rows(self, label: str) -> list[dict[str, Any]]:
        rows = []
        for t in range(self.etr.size + 1):
            last = t == self.etr.size
            rows.append(
                {
                    "method": label,
                    "key": self.key,
                    "seed": self.seed,
                    "step": t,
                    "perf": float(self.perf[t]),
                    **{
                        name: (math.nan if last else float(getattr(self, name)[t]))
                        for name in (
                            "etr",
                            "below_one",
                            "above_zero",
                            "strict_valid",
                            "signal",
                            "capability",
                            "pearson_next",
                            "auc_next",
                            "pearson_true",
                            "brier",
                            "ece",
                            "spearman",
                            "zero_variance",
                        )
                    },
                    "rollouts": 0 if last else int(self.rollouts[t]),
                }
            )
        return rows


@dataclass
class ExperimentResult:
    config: SimConfig
    groups: dict[str, list[tuple[str, MethodSpec]]]
    runs: dict[tuple[str, int], RunRecord]
    seconds: float = 0.0

    def records(self, spec: MethodSpec) -> list[RunRecord]:
        return [self.runs[(spec.key, s)] for s in self.config.seeds]


def make_selector(
    spec: MethodSpec,
    world: TaskWorld,
    seed: int,
    learner: SimulatedLearner,
    config: SimConfig,
    rollout: Callable[..., Any] | None = None,
) -> Selector:
    """The selector ``spec`` names, built by the method table over the world's pool; a method that
    rolls out itself calls ``rollout`` (default: the learner's)."""
    m = method(spec.kind)
    given = {
        "lam": spec.lam,
        "rho": spec.rho,
        "thompson": spec.thompson,
        "n_rollouts": world.config.n_rollouts,
        "min_gap": config.min_gap,
        "oversample": config.dapo_oversample,
        "seed": seed,
        **{p.name: getattr(spec, p.name) for p in _RULE},
        **dict(spec.extra),
    }
    params = {k: v for k, v in given.items() if k in {p.name for p in m.params}}
    signals = simulated_signals(world, seed, m.signals)  # extra columns, embeddings: see .signals
    refs = reads_references(spec, config.information)
    return m.build(
        world.num_tasks,
        weak=world.weak if refs else None,
        strong=world.strong if refs else None,
        rollout=learner.rollout if rollout is None else rollout,
        threads=config.threads,
        signals=signals,
        **params,
    )


def reads_references(spec: MethodSpec, information: str) -> bool:
    """Whether the run of ``spec`` hands its method the reference pass rates under the
    ``information`` setting (:attr:`SimConfig.information`)."""
    m = method(spec.kind)
    if m.references == "unused":
        return False
    if spec.references is not None:
        return spec.references
    if information == "none":
        return False
    return information == "shared" or m.name not in PRIOR_PEERS


# The learner's random stream is named by the run's key, except dynamic sampling's, named "dapo":
# the published simulations (the docs' tables, the scoreboard) drew it from that stream, so they
# reproduce from it.
_STREAM_NAMES = {"dynamic": "dapo"}


def _stream(key: str) -> int:
    return zlib.crc32(_STREAM_NAMES.get(key, key).encode())


def run_method(
    spec: MethodSpec,
    world: TaskWorld,
    seed: int,
    config: SimConfig,
    on_step: Callable[[], object] | None = None,
) -> RunRecord:
    """Train a fresh learner for ``config.steps`` steps with ``spec`` choosing the batches."""
    T, B, n = config.steps, config.batch_size, world.config.n_rollouts
    learner = SimulatedLearner(world, seed, stream=_stream(spec.key))
    calls = [0]  # generation calls made through the rollout callback (one a round)

    def counted_rollout(*args: Any) -> Any:
        calls[0] += 1
        return learner.rollout(*args)

    selector = make_selector(spec, world, seed, learner, config, rollout=counted_rollout)
    # Evidence quality is measured on the estimator the method uses; Random gets a shadow BOTS
    # fed with its batches, so the estimator is judged on uniform batches as in the paper (E.3).
    tracker: Any = None
    # The methods that carry an estimator: the interpolation's (momentum), or one fed by signals.
    if MOMENTUM in method(spec.kind).params or method(spec.kind).signals:
        tracker = selector
    elif spec.kind == "random":
        tracker = method("bots").build(
            world.num_tasks,
            weak=world.weak,
            strong=world.strong,
            threads=config.threads,
            lam=config.lam,
            rho=config.rho,
            n_rollouts=n,
            min_gap=config.min_gap,
            seed=seed,
        )

    def nan() -> FloatArray:
        return np.full(T, np.nan)

    rec = RunRecord(
        key=spec.key,
        seed=seed,
        etr=nan(),
        below_one=nan(),
        above_zero=nan(),
        perf=np.full(T + 1, np.nan),
        hist=np.zeros((T, n + 1), np.int64),
        rollouts=np.zeros(T, np.int64),
        signal=nan(),
        capability=nan(),
        pearson_next=nan(),
        auc_next=nan(),
        pearson_true=nan(),
        strict_valid=nan(),
        brier=nan(),
        ece=nan(),
        spearman=nan(),
        zero_variance=nan(),
        rounds=np.zeros(T, np.int64),
        trained=np.zeros(T),
    )
    # Late evidence (config.lag): (step's ids, successes, trials) waiting to reach the selector.
    lagged = config.lag > 0 and _takes_policy_lag(selector)
    waiting: list[tuple[Any, Any, Any]] = []
    rec.perf[0] = learner.evaluate()
    prev_pred: FloatArray | None = None
    spent = 0
    for t in range(T):
        calls[0] = 0
        ids = selector.select(B)
        predicted = predicted_pass_rates(selector, ids)  # before the rollouts: what it expected
        succ: npt.NDArray[Any]
        # Rollouts behind each trained task: n, or one count per task for the methods that choose
        # them (RollsOut); a scalar keeps the original code path (and results) of every other method.
        trials: Any = n
        if isinstance(selector, RollsOut):
            batch = selector.take_batch()
            assert batch is not None  # select() always leaves its batch
            ids, succ, trials = batch.task_ids, batch.successes, batch.trials
            rec.rollouts[t] = batch.rollouts
        elif method(spec.kind).rollout_mode is RolloutMode.DAPO_FILL:
            # DAPO's filling (peers.dapo.DynamicSampling): the successes of the batch it kept, and
            # every rollout it spent finding them.
            filling: Any = selector
            taken = filling.take_rollouts()
            assert taken is not None  # select() always leaves the batch's rollouts
            succ = taken
            rec.rollouts[t] = filling.total_rollouts - spent
            spent = filling.total_rollouts
        else:
            succ = learner.rollout(ids)
            rec.rollouts[t] = ids.size * n
            calls[0] += 1
        rec.rounds[t] = calls[0]
        rec.trained[t] = float(np.sum(np.broadcast_to(trials, np.shape(ids))))
        r = effective_ratios(succ, trials)
        rec.etr[t], rec.below_one[t], rec.above_zero[t] = r.etr, r.below_one, r.above_zero
        rec.strict_valid[t] = r.strict_valid
        # Rates on the n-rollout grid, so that every method's histogram has the same bins.
        rec.hist[t] = rate_histogram(succ if np.isscalar(trials) else np.rint(succ / trials * n), n)
        if prev_pred is not None and t > 0:
            p = prev_pred[ids]
            ok = ~np.isnan(p)
            if ok.sum() >= 2:
                k: Any = trials if np.isscalar(trials) else trials[ok]
                rate = succ[ok] / k
                rec.pearson_next[t - 1] = pearson(p[ok], rate)
                eff = (succ[ok] > 0) & (succ[ok] < k)
                rec.auc_next[t - 1] = roc_auc(effective_probability(p[ok], n), eff)
        cal = calibration_metrics(predicted, succ, trials)
        rec.brier[t], rec.ece[t], rec.spearman[t], rec.zero_variance[t] = cal
        if lagged:
            waiting.append((ids, succ, trials))
            if len(waiting) > config.lag:
                old_ids, old_succ, old_trials = waiting.pop(0)
                selector.update(old_ids, old_succ, old_trials, policy_lag=config.lag)  # type: ignore[call-arg]
        else:
            selector.update(ids, succ, trials)
        if tracker is not None and tracker is not selector:
            tracker.update(ids, succ, trials)
        rec.signal[t] = learner.train(ids, succ) if np.isscalar(trials) else learner.train(ids, succ, trials)
        rec.perf[t + 1] = learner.evaluate()
        prev_pred = None
        if tracker is not None:
            cap = tracker.capability
            rec.capability[t] = math.nan if cap is None else float(cap)
            pred = tracker.predicted()
            if pred is not None:
                prev_pred = np.asarray(pred, dtype=np.float64)
                ok = ~np.isnan(prev_pred)
                if ok.sum() >= 2:
                    rec.pearson_true[t] = pearson(prev_pred[ok], learner.success_prob()[ok])
        if on_step is not None:
            on_step()
    return rec


def _takes_policy_lag(selector: Any) -> bool:
    """Whether ``selector.update`` takes ``policy_lag`` (the BOTS methods)."""
    import inspect

    try:
        return "policy_lag" in inspect.signature(selector.update).parameters
    except (TypeError, ValueError):
        return False


def run_experiment(
    config: SimConfig,
    progress: bool = True,
    desc: str = "simulate",
) -> ExperimentResult:
    """Run every distinct method of every group on every seed (progress bar on stderr)."""
    import time

    from .._progress import progress_bar

    groups = build_groups(config)
    unique: dict[str, MethodSpec] = {}
    for rows in groups.values():
        for _, spec in rows:
            unique.setdefault(spec.key, spec)
    total = len(unique) * len(config.seeds) * config.steps
    runs: dict[tuple[str, int], RunRecord] = {}
    start = time.perf_counter()
    with progress_bar(total=total, desc=desc, unit="step", disable=not progress, leave=True, mininterval=0.5) as bar:
        for seed in config.seeds:
            world = make_world(config.learner, seed)
            for key, spec in unique.items():
                bar.set_postfix_str(f"seed={seed} {key}", refresh=False)
                runs[(key, seed)] = run_method(spec, world, seed, config, on_step=lambda: bar.update())
    return ExperimentResult(config, groups, runs, seconds=time.perf_counter() - start)
