"""The task-selection methods bots-rft implements: one table of what each method is and takes
(:class:`MethodEntry`, :data:`ENTRIES`), and the registry that pairs each entry with the class
that implements it and what builds its selector (:class:`Method`, :data:`METHODS`).

Every entry point reads this table rather than spelling methods itself: ``bots simulate``, ``bots
train`` and ``bots compare`` take their method names, defaults and ranges from it, and the
trainer's config and the simulator check their parameters with it. A method (:class:`MethodEntry`)
is

- a **name** (plus accepted aliases) and the label result tables print;
- its **parameters**: each a :class:`~bots_rft.selector.parameters.Parameter` with its type, range and
  default, and one check that raises :class:`~bots_rft.errors.InvalidTypeError` for a value of
  the wrong type and :class:`~bots_rft.errors.InvalidArgumentError` for one out of range, both
  naming the parameter and the value;
- the parameters it **fixes** (the BOTS-MoPPS and BOTS-DOTS presets are BOTS with λ, ρ and the
  sampling rule pinned, as the paper's appendix E.6);
- whether it needs the weak/strong **reference pass rates**, and its **rollout mode**
  (:class:`RolloutMode`): how a step gets the groups it trains on, which the trainer and the
  simulator read instead of the method's name. A method whose ``select`` rolls out (every mode but
  ``plain``; DAPO's dynamic sampling filters on rollouts, so it calls back into the trainer) gets
  a ``rollout`` callback when its selector is built; one that spends a variable number of
  rollouts per task (screening, sequential sampling, per-task budgets) calls it as
  ``rollout(task_ids, counts)`` and hands each step's groups, trials and rollouts spent over
  through :class:`bots_rft.selector.protocol.RollsOut` (base class:
  :class:`bots_rft.selector.peers.base.SelfRolling`), so that every rollout it generates is
  charged; and whether ``bots train`` can run it (``trainer``; it runs every method of this
  table, those that roll out themselves through a callback that generates real completions,
  :meth:`bots_rft.train.step_batches.CallbackBatches.rollout`);
- the further per-task **signals** it reads (``"references"``: an [N, k] matrix of reference pass
  rates; ``"embeddings"``: an [N, d] matrix);
- and nothing about its checkpoint: every selector's state dict is written with
  :func:`bots_rft.checkpoint.save_state` (a checksummed safetensors file; never a pickle), so
  one reader restores any of them (the trainer's file name: :func:`bots_rft.train.run_selector.selector_file`).

:data:`METHODS` holds every method as a :class:`Method`: its table entry (every field of
:class:`MethodEntry`, and its checks) plus the **class** that implements it
(:attr:`Method.implementation`, ``"module:qualified name"``) and :meth:`Method.build`, which makes
the selector ``bots simulate`` or ``bots train`` runs. A method that rolls out gets the
``rollout`` callback at :meth:`Method.build`; the further per-task signals it reads are passed as
``signals=``.

The table names no selector class and imports none: the selector modules are imported when a
method is built, not when this module is imported, so that reading the registry costs no more
than reading the table. A method defined elsewhere is one :class:`Method` (its entry, its class
and its builder, in the file of its class) added with one line, :func:`register`; from then on
``bots simulate``, the trainer's config (each of its parameters a key, checked against its range)
and :func:`method` know it (docs/adding-a-method.md). The contract test
(``tests/test_method_contract.py``) runs every method through the battery every method passes,
and checks that the table and the registry list the same methods.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

import numpy.typing as npt

from ..errors import InvalidArgumentError, InvalidTypeError
from ..estimators.base import DEFAULT_MIN_GAP
from .parameters import (
    BOTS_PARAMS,
    CANDIDATE_RATIO,
    DOTS_FIXED,
    GEN_RATIO,
    INITIAL_DIFFICULTY,
    KEEP,
    LAM,
    MAX_GEN_BATCHES,
    MAX_ROUNDS,
    MIN_GAP,
    MOMENTUM,
    MOPPS_FIXED,
    N_CONTINUE,
    N_HIGH,
    N_INIT,
    N_LOW,
    N_MAX,
    N_MIN,
    OVERSAMPLE,
    P_EASY,
    P_HARD,
    PARAMETERS,
    PRIOR_ALPHA,
    PRIOR_PRECISION,
    PSEUDO_ROLLOUTS,
    RHO,
    ROLLOUTS,
    ROUND_REPEAT,
    ROUNDS,
    RULE_PARAMS,
    SAMPLING_RATIO,
    SEED,
    SENSITIVITY,
    STEP_SIZE,
    TARGET,
    TARGET_REWARD,
    TARGET_ZERO_VARIANCE,
    THOMPSON,
    TRANSITION_DECAY,
    Parameter,
)
from .parameters import shown as _shown

if TYPE_CHECKING:
    from .protocol import CountedRolloutFn, RolloutFn, Selector

__all__ = [
    "Parameter",
    "RolloutMode",
    "register",
    "unregister",
    "load_entry_points",
    "ENTRY_POINT_GROUP",
    "dynamic_sampling",
    "Method",
    "MethodEntry",
    "References",
    "METHODS",
    "PARAMETERS",
    "DEFAULT_MIN_GAP",
    "method",
    "method_names",
    "ENTRIES",
    "entry",
]

References = Literal["unused", "optional", "required"]


class RolloutMode(str, Enum):
    """How a method's step gets the groups it trains on, which a trainer reads off the method
    instead of its name.

    - ``plain``: the selector picks B tasks; each is rolled out n times; every group is trained on.
    - ``callback``: ``select`` rolls out itself, through the ``rollout(task_ids, counts)`` callback
      the selector is built with, and hands over each step's groups
      (:class:`bots_rft.selector.protocol.RollsOut`).
    - ``planned``: tasks and a rollout count for each come from a posterior's plan
      (:meth:`bots_rft.BOTS.plan`); a trainer rolls the plan out itself and drives the selector
      :meth:`Method.build_unrolled` makes (the posterior the plans draw from).
    - ``dapo_fill``: DAPO's dynamic sampling: generation batches are rolled out until B groups whose
      rewards disagree are found; a trainer runs the fill loop itself on the generation batches the
      selector :meth:`Method.build_unrolled` makes proposes.

    Built by :meth:`Method.build` with a callback (as ``bots simulate`` does), every method whose
    mode is not ``plain`` rolls out inside ``select``.
    """

    PLAIN = "plain"
    CALLBACK = "callback"
    PLANNED = "planned"
    DAPO_FILL = "dapo_fill"


@dataclass(frozen=True)
class MethodEntry:
    """One selection method as the table states it (see the module docstring for the fields'
    meaning); :class:`bots_rft.selector.registry.Method` adds what builds its selector."""

    name: str
    label: str
    summary: str
    params: tuple[Parameter, ...]
    references: References
    fixed: Mapping[str, Any] = field(default_factory=dict)
    rollout_mode: RolloutMode = RolloutMode.PLAIN
    aliases: tuple[str, ...] = ()
    signals: tuple[str, ...] = ()
    # Whether `bots train` can run it (a method for bots simulate only sets False).
    trainer: bool = True

    @property
    def reads_embeddings(self) -> bool:
        """Whether it reads one vector per task (the ``embeddings`` signal: bots-embed, bots-sim)."""
        return "embeddings" in self.signals

    @property
    def rolls_out(self) -> bool:
        """Whether its selector, built with a rollout callback, rolls out inside ``select``
        (every mode but ``plain``)."""
        return self.rollout_mode is not RolloutMode.PLAIN

    def step_mode(self, dynamic_sampling: bool = False) -> RolloutMode:
        """The rollout mode of a trainer's step with this method: its own, except that
        ``dynamic_sampling`` (DAPO's filter on top of a method that selects plainly) makes a
        ``plain`` method ``dapo_fill``."""
        if self.rollout_mode is RolloutMode.PLAIN and dynamic_sampling:
            return RolloutMode.DAPO_FILL
        return self.rollout_mode

    def param(self, name: str) -> Parameter:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def defaults(self) -> dict[str, Any]:
        return {p.name: p.default for p in self.params}

    def check(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Every parameter of this method, from ``params`` or its default, checked. A parameter
        the method fixes, or does not have, is refused naming it."""
        names = {p.name for p in self.params}
        for key in params:
            if key in self.fixed:
                raise InvalidArgumentError(
                    f"{key}: the {self.name} method fixes {', '.join(f'{k}={v!r}' for k, v in self.fixed.items())}; "
                    f"got {key}={_shown(params[key])}",
                    key,
                )
            if key not in names:
                raise InvalidArgumentError(
                    f"{key}: not a parameter of the {self.name} method (it takes {', '.join(sorted(names)) or 'none'})",
                    key,
                )
        return {p.name: p.check(params[p.name]) if p.name in params else p.default for p in self.params}


#: The methods, by canonical name, in the order the trainer lists them (then those :func:`register`
#: added).
_ENTRIES: dict[str, MethodEntry] = {
    m.name: m
    for m in (
        MethodEntry(
            "bots",
            "BOTS",
            "Bayesian online task selection: explicit and implicit evidence, Thompson sampling",
            BOTS_PARAMS,
            "optional",
        ),
        MethodEntry(
            "bots-plan",
            "BOTS-Plan",
            "BOTS choosing tasks and rollout counts together: the plan with the most expected informative "
            "groups under a budget of batch × n rollouts (BOTS.plan)",
            (*BOTS_PARAMS, N_MIN, N_MAX),
            "optional",
            rollout_mode=RolloutMode.PLANNED,
        ),
        MethodEntry(
            "bots-screen",
            "BOTS-Screen",
            "BOTS proposing the prompts SPEED-RL's screen tries: n_init screening rollouts each, "
            "n_continue more for those whose screening disagrees; every rollout is BOTS's evidence",
            (*BOTS_PARAMS, N_INIT, N_CONTINUE, GEN_RATIO, MAX_GEN_BATCHES),
            "optional",
            rollout_mode=RolloutMode.CALLBACK,
        ),
        MethodEntry(
            "random",
            "Random",
            "uniform without replacement within each batch",
            (SEED,),
            "unused",
        ),
        MethodEntry(
            "offline",
            "Offline",
            "a static easy-to-hard curriculum by the strong reference pass rate",
            (),
            "required",
        ),
        MethodEntry(
            "reference-filter",
            "Ref-filter",
            "uniform over the tasks the weak and strong references do not both solve always or "
            "never: the references' information without online updating (a control arm for BOTS)",
            (SEED,),
            "required",
        ),
        MethodEntry(
            "mopps",
            "BOTS-MoPPS",
            "BOTS on explicit evidence only, without discount (appendix E.6)",
            (TARGET, PSEUDO_ROLLOUTS, SEED),
            "unused",
            fixed=MOPPS_FIXED,
        ),
        MethodEntry(
            "dots",
            "BOTS-DOTS",
            "BOTS on the latest evidence only, greedy on the mean (appendix E.6)",
            (TARGET, PSEUDO_ROLLOUTS, MOMENTUM, MIN_GAP, SEED),
            "required",
            fixed=DOTS_FIXED,
        ),
        MethodEntry(
            "dynamic",
            "DAPO-DS",
            "DAPO's dynamic sampling: roll out generation batches in epoch order, keep "
            "the tasks whose rollouts disagree",
            (ROLLOUTS, OVERSAMPLE, MAX_ROUNDS, SEED),
            "unused",
            rollout_mode=RolloutMode.DAPO_FILL,
            aliases=("dapo",),
        ),
        MethodEntry(
            "bots-multiref",
            "BOTS-MultiRef",
            "BOTS with implicit evidence from k reference pass rates, weights "
            "fitted online (weak and strong alone: the interpolation)",
            (LAM, RHO, TARGET, THOMPSON, PSEUDO_ROLLOUTS, MOMENTUM, MIN_GAP, SEED, *RULE_PARAMS),
            "required",
            signals=("references",),
        ),
        MethodEntry(
            "bots-sim",
            "BOTS-Sim",
            "BOTS with implicit evidence spread to similar tasks through task embeddings (top-k neighbour kernel)",
            (LAM, RHO, TARGET, THOMPSON, PSEUDO_ROLLOUTS, SEED, *RULE_PARAMS),
            "unused",
            signals=("embeddings",),
        ),
        MethodEntry(
            "bots-embed",
            "BOTS-Embed",
            "BOTS without reference models: implicit evidence for every task from an online logistic "
            "regression of the run's own success rates on task embeddings",
            (LAM, RHO, TARGET, THOMPSON, PSEUDO_ROLLOUTS, PRIOR_PRECISION, SEED, *RULE_PARAMS),
            "unused",
            signals=("embeddings",),
        ),
        MethodEntry(
            "dps",
            "DPS",
            "Dynamics-Predictive Sampling: per-task hidden Markov model of the solving state "
            "(unsolved/partial/solved), top-k predicted partial among candidates",
            (CANDIDATE_RATIO, PRIOR_ALPHA, TRANSITION_DECAY, SEED, ROLLOUTS),
            "optional",
        ),
        MethodEntry(
            "greso",
            "GRESO",
            "DAPO dynamic sampling that skips, before rollout, prompts whose recent groups had zero "
            "reward variance, with self-tuning exploration probabilities",
            (ROLLOUTS, P_EASY, P_HARD, TARGET_ZERO_VARIANCE, SAMPLING_RATIO, MAX_ROUNDS, SEED),
            "unused",
            rollout_mode=RolloutMode.CALLBACK,
        ),
        MethodEntry(
            "speed",
            "SPEED-RL",
            "screening rollouts for every candidate, full rollouts only for those whose screening disagrees",
            (N_INIT, N_CONTINUE, GEN_RATIO, MAX_GEN_BATCHES, SEED),
            "unused",
            rollout_mode=RolloutMode.CALLBACK,
            aliases=("speed-rl",),
        ),
        MethodEntry(
            "adarft",
            "AdaRFT",
            "a target difficulty that moves with the batch reward; the tasks nearest it by reference difficulty",
            (STEP_SIZE, SENSITIVITY, TARGET_REWARD, INITIAL_DIFFICULTY, SEED),
            "required",
        ),
        MethodEntry(
            "knapsack",
            "Knapsack-RL",
            "rollouts per task chosen as a knapsack over expected value and cost, same total budget",
            (ROLLOUTS, N_LOW, N_HIGH, SEED),
            "optional",
            rollout_mode=RolloutMode.CALLBACK,
            aliases=("knapsack-rl",),
        ),
        MethodEntry(
            "reinforce-ada",
            "Reinforce-Ada",
            "sequential sampling in rounds; a prompt stops once it has both correct and incorrect rollouts",
            (ROUNDS, ROUND_REPEAT, KEEP, SEED),
            "unused",
            rollout_mode=RolloutMode.CALLBACK,
            aliases=("reinforce_ada", "reinforceada"),
        ),
    )
}
ENTRIES: Mapping[str, MethodEntry] = MappingProxyType(_ENTRIES)

_BY_NAME: dict[str, MethodEntry] = {alias: m for m in ENTRIES.values() for alias in (m.name, *m.aliases)}


def method_names(*, aliases: bool = False) -> tuple[str, ...]:
    """The canonical method names (and, with ``aliases``, every other name accepted for them)."""
    return tuple(_BY_NAME) if aliases else tuple(ENTRIES)


def entry(name: Any, argument: str = "method") -> MethodEntry:
    """The table entry of the method ``name`` (or an alias of it) names; an unknown one is an
    :class:`InvalidArgumentError` naming ``argument``, the value and the known names."""
    if not isinstance(name, str):
        raise InvalidTypeError(f"{argument}: must be a method name, got {_shown(name)}", argument)
    found = _BY_NAME.get(name.strip().lower())
    if found is None:
        raise InvalidArgumentError(f"{argument}: expected one of {list(ENTRIES)}, got {name!r}", argument)
    return found


#: What builds a method's selector: ``builder(method, num_tasks, weak, strong, rollout, threads,
#: params, **signals)``, ``params`` every parameter of the method checked (:meth:`MethodEntry.check`),
#: ``weak``/``strong`` the reference pass rates or None, ``rollout`` the callback or None,
#: ``threads`` the BOTS core's thread pool, ``signals`` the further per-task arrays it reads.
Builder = Callable[..., "Selector"]


@dataclass(frozen=True)
class Method(MethodEntry):
    """One selection method: its table entry, the class that implements it and its builder.

    ``builder`` makes the selector :meth:`build` returns (see :data:`Builder`). ``unrolled``,
    which a ``planned`` or ``dapo_fill`` method has, makes the selector a trainer drives when it
    rolls the method's steps out itself (:meth:`build_unrolled`): the posterior the plans draw
    from, or the proposer of DAPO's generation batches; it is called as ``unrolled(method,
    num_tasks, weak, strong, threads, params)``."""

    implementation: str = field(kw_only=True)  # "module:qualified name" of the class or preset that builds it
    builder: Builder = field(kw_only=True, compare=False, repr=False)
    unrolled: Callable[..., Selector] | None = field(default=None, kw_only=True, compare=False, repr=False)

    @classmethod
    def registered(
        cls,
        listed: MethodEntry,
        implementation: str,
        builder: Builder,
        unrolled: Callable[..., Selector] | None = None,
    ) -> Method:
        """The table entry ``listed``, implemented by ``implementation`` and built by ``builder``."""
        return cls(
            **{f.name: getattr(listed, f.name) for f in fields(MethodEntry)},
            implementation=implementation,
            builder=builder,
            unrolled=unrolled,
        )

    @property
    def listed(self) -> MethodEntry:
        """Its table entry alone."""
        return MethodEntry(**{f.name: getattr(self, f.name) for f in fields(MethodEntry)})

    def build(
        self,
        num_tasks: int,
        *,
        weak: npt.ArrayLike | None = None,
        strong: npt.ArrayLike | None = None,
        rollout: RolloutFn | CountedRolloutFn | None = None,
        threads: int | None = None,
        signals: Mapping[str, Any] | None = None,
        **params: Any,
    ) -> Selector:
        """A selector of this method over ``num_tasks`` tasks. ``weak``/``strong``: reference pass
        rates (NaN unknown), used when the method uses them; ``rollout``: the callback a method that
        rolls out needs; ``threads``: the BOTS core's thread pool (None: every core); ``signals``:
        the further per-task arrays the method reads (:attr:`signals`), by name."""
        extra = dict(signals or {})
        unread = sorted(set(extra) - set(self.signals))
        if unread:
            raise InvalidArgumentError(
                f"signals: the {self.name} method reads {list(self.signals) or 'none'}, got {unread}", "signals"
            )
        return self.builder(self, num_tasks, weak, strong, rollout, threads, self.check(params), **extra)

    def build_unrolled(
        self,
        num_tasks: int,
        *,
        weak: npt.ArrayLike | None = None,
        strong: npt.ArrayLike | None = None,
        threads: int | None = None,
        **params: Any,
    ) -> Selector:
        """The selector a trainer drives when it rolls this method's steps out itself (its mode
        ``planned`` or ``dapo_fill``): the posterior its plans draw from, or the proposer of its
        generation batches. A method without one is an :class:`InvalidArgumentError`."""
        if self.unrolled is None:
            raise InvalidArgumentError(
                f"method: the {self.name} method ({self.rollout_mode.value}) has no selector for a trainer that "
                "rolls out itself",
                "method",
            )
        return self.unrolled(self, num_tasks, weak, strong, threads, self.check(params))


# ---------------------------------------------------------------------------------------------
# Builders: each imports its selector's module when called, so that importing the registry
# imports no selector.
# ---------------------------------------------------------------------------------------------


def _references(m: Method, weak: Any, strong: Any) -> tuple[Any, Any] | None:
    if (weak is None) != (strong is None):
        raise InvalidArgumentError(
            f"{'strong' if strong is None else 'weak'}: the {m.name} method needs both weak and strong, or neither",
            "weak" if weak is None else "strong",
        )
    if weak is None:
        if m.references == "required":
            raise InvalidArgumentError(
                f"weak: the {m.name} method needs reference pass rates (weak and strong)", "weak"
            )
        return None
    return weak, strong


def _interpolation(m: Method, weak: Any, strong: Any, p: dict[str, Any]) -> Any:
    from ..estimators import Interpolation

    refs = _references(m, weak, strong)
    return None if refs is None else Interpolation(refs[0], refs[1], p["momentum"], min_gap=p["min_gap"])


def _bots(n: int, p: dict[str, Any], evidence: Any, threads: Any) -> Selector:
    """BOTS with the table's parameters ``p`` and an estimator (or None)."""
    from .bots import BOTS

    return BOTS(
        n,
        lam=p["lam"],
        rho=p["rho"],
        target=p["target"],
        n_rollouts=p["n_rollouts"],
        thompson=p["thompson"],
        tau=p["tau"],
        adaptive_rho=p["adaptive_rho"],
        adaptive_lam=p["adaptive_lam"],
        lag_discount=p["lag_discount"],
        evidence=evidence,
        seed=p["seed"],
        threads=threads,
    )


def _build_bots(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> Selector:
    return _bots(n, p, _interpolation(m, weak, strong, p), threads)


def _build_mopps(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> Selector:
    from .bots import BOTS

    return BOTS.mopps(n, target=p["target"], n_rollouts=p["n_rollouts"], seed=p["seed"], threads=threads)


def _build_dots(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> Selector:
    from .bots import BOTS

    evidence = _interpolation(m, weak, strong, p)
    return BOTS.dots(n, evidence, target=p["target"], n_rollouts=p["n_rollouts"], seed=p["seed"], threads=threads)


def _build_multiref(
    m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any], references: Any = None
) -> Selector:
    from ..estimators import MultiReference

    if references is None:  # the two columns every pool with references has
        refs = _references(m, weak, strong)
        assert refs is not None  # required
        references = list(refs)
    evidence = MultiReference(references, momentum=p["momentum"], min_gap=p["min_gap"])
    return _bots(n, p, evidence, threads)


def _build_similarity(
    m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any], embeddings: Any = None
) -> Selector:
    from ..estimators import Similarity

    evidence = Similarity(_embeddings_signal(m, n, embeddings))
    return _bots(n, p, evidence, threads)


def _build_embedding_regression(
    m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any], embeddings: Any = None
) -> Selector:
    from ..estimators import EmbeddingRegression

    # The regression forgets at BOTS's own λ, so its evidence fades as the posteriors' does.
    rows = _embeddings_signal(m, n, embeddings)
    evidence = EmbeddingRegression(rows, forgetting=p["lam"], prior_precision=p["prior_precision"])
    return _bots(n, p, evidence, threads)


def _embeddings_signal(m: Method, n: int, embeddings: Any) -> Any:
    """The ``embeddings`` signal a method reads: present, and one row per task."""
    if embeddings is None:
        raise InvalidArgumentError(
            f"signals: the {m.name} method needs signals['embeddings'], an [N, d] matrix", "signals"
        )
    rows = len(embeddings) if hasattr(embeddings, "__len__") else None  # else the estimator's type check
    if rows is not None and rows != n:
        raise InvalidArgumentError(f"embeddings: has {rows} rows, expected num_tasks={n}", "embeddings")
    return embeddings


def _build_plan(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> Selector:
    from .plan import PlannedBOTS

    if rollout is None:
        raise InvalidArgumentError(
            f"rollout: the {m.name} method rolls out inside select and needs a rollout callback "
            "rollout(task_ids, counts)",
            "rollout",
        )
    if p["n_max"] < p["n_min"]:
        raise InvalidArgumentError(f"n_max: must be >= n_min={p['n_min']}, got {p['n_max']}", "n_max")
    per_task = max(1, round(p["n_rollouts"]))  # the rollouts BOTS gives a task: the plan's budget per batch slot
    bots = _bots(n, p, _interpolation(m, weak, strong, p), threads)
    return PlannedBOTS(bots, rollout, n_rollouts=per_task, n_min=p["n_min"], n_max=p["n_max"])


def _build_screen(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> Selector:
    from .screen import ScreenedBOTS

    screen = {k: p[k] for k in ("n_init", "n_continue", "gen_ratio", "max_gen_batches")}
    bots = _bots(n, p, _interpolation(m, weak, strong, p), threads)
    return ScreenedBOTS(n, _needs_rollout(m, rollout), bots=bots, seed=p["seed"], **screen)


def _build_random(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> Selector:
    from .static import RandomSelector

    return RandomSelector(n, seed=p["seed"])


def _build_offline(
    m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]
) -> Selector:
    from .static import OfflineSelector

    refs = _references(m, weak, strong)
    assert refs is not None  # required
    sel = OfflineSelector(*refs)
    if sel.num_tasks != n:
        raise InvalidArgumentError(f"weak: has {sel.num_tasks} pass rates, expected num_tasks={n}", "weak")
    return sel


def _build_reference_filter(
    m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]
) -> Selector:
    from .static import ReferenceFilterSelector

    refs = _references(m, weak, strong)
    assert refs is not None  # required
    sel = ReferenceFilterSelector(*refs, seed=p["seed"])
    if sel.num_tasks != n:
        raise InvalidArgumentError(f"weak: has {sel.num_tasks} pass rates, expected num_tasks={n}", "weak")
    return sel


def _build_dynamic(
    m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]
) -> Selector:
    from .peers.dapo import DynamicSampling

    if rollout is None:
        raise InvalidArgumentError(
            f"rollout: the {m.name} method rolls out inside select and needs a rollout callback", "rollout"
        )
    return DynamicSampling(
        n, rollout, n_rollouts=p["n_rollouts"], oversample=p["oversample"], max_rounds=p["max_rounds"], seed=p["seed"]
    )


def _needs_rollout(m: Method, rollout: Any) -> Any:
    if rollout is None:
        raise InvalidArgumentError(
            f"rollout: the {m.name} method rolls out inside select and needs a rollout callback "
            "rollout(task_ids, counts)",
            "rollout",
        )
    return rollout


def _build_dps(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> Selector:
    from .peers.dps import DynamicsPredictiveSampling

    refs = _references(m, weak, strong)  # the weak reference's rate is the prior, when given
    return DynamicsPredictiveSampling(n, **p, prior=None if refs is None else refs[0])


def _build_adarft(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> Selector:
    from .peers.adarft import AdaRFT

    refs = _references(m, weak, strong)
    assert refs is not None  # required
    sel = AdaRFT(*refs, **p)
    if sel.num_tasks != n:
        raise InvalidArgumentError(f"weak: has {sel.num_tasks} pass rates, expected num_tasks={n}", "weak")
    return sel


def _build_self_rolling(cls_path: str) -> Callable[..., Selector]:
    def build(m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]) -> Selector:
        import importlib

        module, _, name = cls_path.partition(":")
        cls = getattr(importlib.import_module(module), name)
        selector: Selector = cls(n, _needs_rollout(m, rollout), **p)
        return selector

    return build


def _build_knapsack(
    m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]
) -> Selector:
    from .peers.knapsack import KnapsackAllocation

    refs = _references(m, weak, strong)  # the weak reference's rate is the first estimate, when given
    return KnapsackAllocation(n, _needs_rollout(m, rollout), **p, prior=None if refs is None else refs[0])


_BUILDERS: dict[str, Callable[..., Selector]] = {
    "dps": _build_dps,
    "adarft": _build_adarft,
    "greso": _build_self_rolling("bots_rft.selector.peers.greso:GRESO"),
    "speed": _build_self_rolling("bots_rft.selector.peers.speed:SpeedRL"),
    "knapsack": _build_knapsack,
    "reinforce-ada": _build_self_rolling("bots_rft.selector.peers.reinforce_ada:ReinforceAda"),
    "bots": _build_bots,
    "random": _build_random,
    "offline": _build_offline,
    "reference-filter": _build_reference_filter,
    "mopps": _build_mopps,
    "dots": _build_dots,
    "dynamic": _build_dynamic,
    "bots-multiref": _build_multiref,
    "bots-sim": _build_similarity,
    "bots-embed": _build_embedding_regression,
    "bots-plan": _build_plan,
    "bots-screen": _build_screen,
}


#: The class or preset that implements each method ("module:qualified name").
_IMPLEMENTATIONS: dict[str, str] = {
    "bots": "bots_rft.selector:BOTS",
    "bots-plan": "bots_rft.selector.plan:PlannedBOTS",
    "bots-screen": "bots_rft.selector.screen:ScreenedBOTS",
    "random": "bots_rft.selector.static:RandomSelector",
    "offline": "bots_rft.selector.static:OfflineSelector",
    "reference-filter": "bots_rft.selector.static:ReferenceFilterSelector",
    "mopps": "bots_rft.selector:BOTS.mopps",
    "dots": "bots_rft.selector:BOTS.dots",
    "dynamic": "bots_rft.selector.peers.dapo:DynamicSampling",
    "bots-multiref": "bots_rft.selector:BOTS",
    "bots-sim": "bots_rft.selector:BOTS",
    "bots-embed": "bots_rft.selector:BOTS",
    "dps": "bots_rft.selector.peers.dps:DynamicsPredictiveSampling",
    "greso": "bots_rft.selector.peers.greso:GRESO",
    "speed": "bots_rft.selector.peers.speed:SpeedRL",
    "adarft": "bots_rft.selector.peers.adarft:AdaRFT",
    "knapsack": "bots_rft.selector.peers.knapsack:KnapsackAllocation",
    "reinforce-ada": "bots_rft.selector.peers.reinforce_ada:ReinforceAda",
}


def _unrolled_plan(m: Method, n: int, weak: Any, strong: Any, threads: Any, p: dict[str, Any]) -> Selector:
    """BOTS-Plan without its callback: the BOTS posterior the plans draw from (a trainer plans each
    step itself, :meth:`bots_rft.BOTS.plan`, and rolls the plan out)."""
    return _bots(n, p, _interpolation(m, weak, strong, p), threads)


def _unrolled_dynamic(m: Method, n: int, weak: Any, strong: Any, threads: Any, p: dict[str, Any]) -> Selector:
    """DAPO-DS without its callback: the epoch walk that proposes its generation batches (a trainer
    fills the batch itself)."""
    from .peers.dapo import EpochOrder

    return EpochOrder(n, seed=p["seed"])


_UNROLLED: dict[str, Callable[..., Selector]] = {"bots-plan": _unrolled_plan, "dynamic": _unrolled_dynamic}

#: The methods, by canonical name, in the order the trainer lists them (the table's order, then
#: those :func:`register` added).
_METHODS: dict[str, Method] = {
    name: Method.registered(listed, _IMPLEMENTATIONS[name], _BUILDERS[name], _UNROLLED.get(name))
    for name, listed in ENTRIES.items()
}
METHODS: Mapping[str, Method] = MappingProxyType(_METHODS)

#: Every parameter object a built-in method takes (``n_rollouts`` is BOTS' real-valued pseudo
#: count in some and dynamic sampling's integer rollouts in others).
_BUILT_IN_PARAMS = frozenset(p for m in _ENTRIES.values() for p in m.params)


def method(name: Any, argument: str = "method") -> Method:
    """The method ``name`` (or an alias of it) names; an unknown one is an
    :class:`InvalidArgumentError` naming ``argument``, the value and the known names."""
    return METHODS[entry(name, argument).name]


def register(m: Method) -> Method:
    """Add the method ``m`` to the registry, so that every entry point runs it: ``bots
    simulate``'s and ``bots train``'s method lists, their configs (each parameter of ``m`` a key,
    checked against its range) and :func:`method`. A name or alias already taken, or a parameter
    named like one of the catalogue's (:data:`bots_rft.selector.parameters.PARAMETERS`) but
    defined otherwise, is an :class:`InvalidArgumentError` naming it. Returns ``m``."""
    if not isinstance(m, Method):
        raise InvalidTypeError(f"method: must be a Method, got {_shown(m)}", "method")
    for name in (m.name, *m.aliases):
        if name != name.strip().lower() or not name:
            raise InvalidArgumentError(f"method: a name is lower case without spaces, got {name!r}", "method")
        if name in _BY_NAME:
            raise InvalidArgumentError(f"method: {name!r} already names the {_BY_NAME[name].name} method", "method")
    for p in m.params:
        known = parameter(p.name)
        if known is not None and p != known and p not in _BUILT_IN_PARAMS:
            raise InvalidArgumentError(
                f"params: {p.name!r} is already a parameter ({known.doc}, {known.span}); reuse it or choose "
                f"another name, got {p!r}",
                "params",
            )
    if m.rollout_mode in (RolloutMode.PLANNED, RolloutMode.DAPO_FILL) and m.unrolled is None:
        raise InvalidArgumentError(
            f"unrolled: a {m.rollout_mode.value} method needs the selector a trainer drives when it rolls out "
            "itself, got None",
            "unrolled",
        )
    _ENTRIES[m.name] = m.listed
    _METHODS[m.name] = m
    for name in (m.name, *m.aliases):
        _BY_NAME[name] = _ENTRIES[m.name]
    return m


def unregister(name: str) -> None:
    """Remove the method ``name`` that :func:`register` added (a built-in method stays)."""
    m = method(name)
    if m.name in _IMPLEMENTATIONS:
        raise InvalidArgumentError(f"method: {m.name!r} is built in and cannot be removed", "method")
    del _ENTRIES[m.name], _METHODS[m.name]
    for alias in (m.name, *m.aliases):
        del _BY_NAME[alias]


#: The entry-point group in which an installed package names its methods (each a :class:`Method`),
#: so that the ``bots`` command line runs them: ``least-recent = "least_recent:METHOD"``.
ENTRY_POINT_GROUP = "bots_rft.methods"


def load_entry_points() -> tuple[str, ...]:
    """Register the methods installed packages name in the :data:`ENTRY_POINT_GROUP` entry-point
    group (those registered already stay as they are); the names of all of them. An entry that
    does not load, or is no :class:`Method`, is an :class:`InvalidArgumentError` naming it."""
    from importlib.metadata import entry_points

    names = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            m = ep.load()
        except Exception as exc:  # noqa: BLE001 - whatever the package's import raises
            raise InvalidArgumentError(
                f"{ENTRY_POINT_GROUP}: {ep.name} = {ep.value!r} does not load ({type(exc).__name__}: {exc})", ep.name
            ) from None
        if not isinstance(m, Method):
            raise InvalidArgumentError(
                f"{ENTRY_POINT_GROUP}: {ep.name} = {ep.value!r} must name a Method, got {_shown(m)}", ep.name
            )
        if _METHODS.get(m.name) is not m:
            register(m)
        names.append(m.name)
    return tuple(names)


def parameter(name: str) -> Parameter | None:
    """The catalogue's parameter ``name`` (:data:`~bots_rft.selector.parameters.PARAMETERS`), or
    that of a registered method that takes it; None when no method takes one of that name."""
    if name in PARAMETERS:
        return PARAMETERS[name]
    for m in _METHODS.values():
        for p in m.params:
            if p.name == name:
                return p
    return None


def parameters() -> dict[str, Parameter]:
    """Every parameter of the catalogue and of the registered methods, by name."""
    out = dict(PARAMETERS)
    for m in _METHODS.values():
        out.update({p.name: p for p in m.params if p.name not in out})
    return out


def dynamic_sampling(num_tasks: int, rollout: RolloutFn, proposer: Selector, params: Mapping[str, Any]) -> Selector:
    """DAPO's dynamic sampling on top of ``proposer``'s picks, rolling out through ``rollout``:
    its parameters (rollouts, oversample, rounds, seed) those of DAPO-DS, read from ``params``
    (other keys are ignored)."""
    from .peers.dapo import DynamicSampling

    dapo = _ENTRIES["dynamic"]
    own = dapo.check({p.name: params[p.name] for p in dapo.params if p.name in params})
    return DynamicSampling(num_tasks, rollout, proposer=proposer, **own)
