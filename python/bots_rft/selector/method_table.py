"""The task-selection methods bots-rft implements, as one table of what each method is and takes.

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
- whether it needs the weak/strong **reference pass rates**, and whether its ``select`` **rolls
  out** (DAPO's dynamic sampling filters on rollouts, so it calls back into the trainer). A
  method that rolls out gets a ``rollout`` callback when its selector is built; one that spends a
  variable number of rollouts per task (screening, sequential sampling, per-task budgets) calls it
  as ``rollout(task_ids, counts)`` and hands each step's groups, trials and rollouts spent over
  through :class:`bots_rft.selector.protocol.RollsOut` (base class:
  :class:`bots_rft.selector.peers.base.SelfRolling`), so that every rollout it generates is charged; and whether ``bots train`` can run it
  (``trainer``; it runs every method of this table, those that roll out themselves through a
  callback that generates real completions, :meth:`bots_rft.train.trainer.GRPOTrainer.peer_rollout`);
- the further per-task **signals** it reads (``"references"``: an [N, k] matrix of reference pass
  rates; ``"embeddings"``: an [N, d] matrix);
- the **file** its state is checkpointed in. Every selector's state dict is written with
  :func:`bots_rft.checkpoint.save_state` (a checksummed safetensors file; never a pickle), so
  one reader restores any of them.

The table names no selector class: it sits below the selectors, beside
:mod:`bots_rft.selector.parameters`, and imports nothing of them. :mod:`bots_rft.selector.registry`, the registry on
top of it, pairs each entry with the class that implements it and builds its selector
(:meth:`bots_rft.selector.registry.Method.build`). Adding a method is adding its class, its entry here and
its builder there; the contract test (``tests/test_method_contract.py``) then runs it through the
battery every method passes, and checks that the table and the registry list the same methods.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from ..errors import InvalidArgumentError, InvalidTypeError
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
    PRIOR_ALPHA,
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

__all__ = [
    "MethodEntry",
    "References",
    "ENTRIES",
    "entry",
    "method_names",
]

References = Literal["unused", "optional", "required"]


@dataclass(frozen=True)
class MethodEntry:
    """One selection method as the table states it (see the module docstring for the fields'
    meaning); :class:`bots_rft.selector.registry.Method` adds what builds its selector."""

    name: str
    label: str
    summary: str
    params: tuple[Parameter, ...]
    references: References
    state_file: str  # the file a trainer checkpoints its state in (bots_rft.checkpoint format)
    fixed: Mapping[str, Any] = field(default_factory=dict)
    rolls_out: bool = False
    aliases: tuple[str, ...] = ()
    signals: tuple[str, ...] = ()
    # Whether `bots train` can run it (a method for bots simulate only sets False).
    trainer: bool = True

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


_BOTS_FILE = "selector.bots"  # BOTS' own file name since the first release
_BASELINE_FILE = "selector_state.bots"

#: The methods, by canonical name, in the order the trainer lists them.
ENTRIES: Mapping[str, MethodEntry] = MappingProxyType(
    {
        m.name: m
        for m in (
            MethodEntry(
                "bots",
                "BOTS",
                "Bayesian online task selection: explicit and implicit evidence, Thompson sampling",
                BOTS_PARAMS,
                "optional",
                _BOTS_FILE,
            ),
            MethodEntry(
                "bots-plan",
                "BOTS-Plan",
                "BOTS choosing tasks and rollout counts together: the plan with the most expected informative "
                "groups under a budget of batch × n rollouts (BOTS.plan)",
                (*BOTS_PARAMS, N_MIN, N_MAX),
                "optional",
                _BOTS_FILE,
                rolls_out=True,
            ),
            MethodEntry(
                "bots-screen",
                "BOTS-Screen",
                "BOTS proposing the prompts SPEED-RL's screen tries: n_init screening rollouts each, "
                "n_continue more for those whose screening disagrees; every rollout is BOTS's evidence",
                (*BOTS_PARAMS, N_INIT, N_CONTINUE, GEN_RATIO, MAX_GEN_BATCHES),
                "optional",
                _BASELINE_FILE,
                rolls_out=True,
            ),
            MethodEntry(
                "random",
                "Random",
                "uniform without replacement within each batch",
                (SEED,),
                "unused",
                _BASELINE_FILE,
            ),
            MethodEntry(
                "offline",
                "Offline",
                "a static easy-to-hard curriculum by the strong reference pass rate",
                (),
                "required",
                _BASELINE_FILE,
            ),
            MethodEntry(
                "reference-filter",
                "Ref-filter",
                "uniform over the tasks the weak and strong references do not both solve always or "
                "never: the references' information without online updating (a control arm for BOTS)",
                (SEED,),
                "required",
                _BASELINE_FILE,
            ),
            MethodEntry(
                "mopps",
                "BOTS-MoPPS",
                "BOTS on explicit evidence only, without discount (appendix E.6)",
                (TARGET, PSEUDO_ROLLOUTS, SEED),
                "unused",
                _BOTS_FILE,
                fixed=MOPPS_FIXED,
            ),
            MethodEntry(
                "dots",
                "BOTS-DOTS",
                "BOTS on the latest evidence only, greedy on the mean (appendix E.6)",
                (TARGET, PSEUDO_ROLLOUTS, MOMENTUM, MIN_GAP, SEED),
                "required",
                _BOTS_FILE,
                fixed=DOTS_FIXED,
            ),
            MethodEntry(
                "dynamic",
                "DAPO-DS",
                "DAPO's dynamic sampling: roll out generation batches in epoch order, keep "
                "the tasks whose rollouts disagree",
                (ROLLOUTS, OVERSAMPLE, MAX_ROUNDS, SEED),
                "unused",
                _BASELINE_FILE,
                rolls_out=True,
                aliases=("dapo",),
            ),
            MethodEntry(
                "bots-multiref",
                "BOTS-MultiRef",
                "BOTS with implicit evidence from k reference pass rates, weights "
                "fitted online (weak and strong alone: the interpolation)",
                (LAM, RHO, TARGET, THOMPSON, PSEUDO_ROLLOUTS, MOMENTUM, MIN_GAP, SEED, *RULE_PARAMS),
                "required",
                _BOTS_FILE,
                signals=("references",),
            ),
            MethodEntry(
                "bots-sim",
                "BOTS-Sim",
                "BOTS with implicit evidence spread to similar tasks through task embeddings (top-k neighbour kernel)",
                (LAM, RHO, TARGET, THOMPSON, PSEUDO_ROLLOUTS, SEED, *RULE_PARAMS),
                "unused",
                _BOTS_FILE,
                signals=("embeddings",),
            ),
            MethodEntry(
                "dps",
                "DPS",
                "Dynamics-Predictive Sampling: per-task hidden Markov model of the solving state "
                "(unsolved/partial/solved), top-k predicted partial among candidates",
                (CANDIDATE_RATIO, PRIOR_ALPHA, TRANSITION_DECAY, SEED, ROLLOUTS),
                "optional",
                _BASELINE_FILE,
            ),
            MethodEntry(
                "greso",
                "GRESO",
                "DAPO dynamic sampling that skips, before rollout, prompts whose recent groups had zero "
                "reward variance, with self-tuning exploration probabilities",
                (ROLLOUTS, P_EASY, P_HARD, TARGET_ZERO_VARIANCE, SAMPLING_RATIO, MAX_ROUNDS, SEED),
                "unused",
                _BASELINE_FILE,
                rolls_out=True,
            ),
            MethodEntry(
                "speed",
                "SPEED-RL",
                "screening rollouts for every candidate, full rollouts only for those whose screening disagrees",
                (N_INIT, N_CONTINUE, GEN_RATIO, MAX_GEN_BATCHES, SEED),
                "unused",
                _BASELINE_FILE,
                rolls_out=True,
                aliases=("speed-rl",),
            ),
            MethodEntry(
                "adarft",
                "AdaRFT",
                "a target difficulty that moves with the batch reward; the tasks nearest it by reference difficulty",
                (STEP_SIZE, SENSITIVITY, TARGET_REWARD, INITIAL_DIFFICULTY, SEED),
                "required",
                _BASELINE_FILE,
            ),
            MethodEntry(
                "knapsack",
                "Knapsack-RL",
                "rollouts per task chosen as a knapsack over expected value and cost, same total budget",
                (ROLLOUTS, N_LOW, N_HIGH, SEED),
                "optional",
                _BASELINE_FILE,
                rolls_out=True,
                aliases=("knapsack-rl",),
            ),
            MethodEntry(
                "reinforce-ada",
                "Reinforce-Ada",
                "sequential sampling in rounds; a prompt stops once it has both correct and incorrect rollouts",
                (ROUNDS, ROUND_REPEAT, KEEP, SEED),
                "unused",
                _BASELINE_FILE,
                rolls_out=True,
                aliases=("reinforce_ada", "reinforceada"),
            ),
        )
    }
)

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
