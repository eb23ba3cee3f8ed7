"""The parameters of the task-selection methods and their estimators: each a :class:`Parameter`
with its type, range, default and one check that raises :class:`~bots_rft.errors.InvalidTypeError`
for a value of the wrong type and :class:`~bots_rft.errors.InvalidArgumentError` for one out of
range, both naming the parameter and the value.

This is the catalogue of the parameters several methods share (BOTS's λ, ρ, p* ... in every
BOTS-based method, the trainer and the simulator's sweeps; the estimators' momentum, gap and
prior precision; a seed; dynamic sampling's rollouts); a parameter that one method alone takes is
defined beside its class, in the method's file. Each default and range is written here once:
everything that takes one of these parameters (every BOTS backend, the estimators, the trainer's
config, the simulator, the verl and Trinity adapters) reads its default from here and checks a
value with :meth:`Parameter.check`. It sits at the bottom of the package beside the errors and
imports nothing else of it but the core, so every layer can read it: the estimators, every
method's file, and :mod:`bots_rft.selector.registry`, which lists the methods on top of them.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

import numpy as np

from . import _core
from .errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "Parameter",
    "ParamType",
    "shown",
    "MAX_SEED",
    "LAM",
    "RHO",
    "TARGET",
    "THOMPSON",
    "PSEUDO_ROLLOUTS",
    "MOMENTUM",
    "MIN_GAP",
    "SEED",
    "ROLLOUTS",
    "OVERSAMPLE",
    "MAX_ROUNDS",
    "TAU",
    "ADAPTIVE_RHO",
    "ADAPTIVE_LAM",
    "N_INIT",
    "N_CONTINUE",
    "GEN_RATIO",
    "MAX_GEN_BATCHES",
    "SCREENING_PARAMS",
    "LAG_DISCOUNT",
    "PRIOR_PRECISION",
    "PARAMETERS",
    "CATALOGUE",
    "RULE_PARAMS",
    "BOTS_PARAMS",
    "MOPPS_FIXED",
    "DOTS_FIXED",
]

#: The largest seed any selector accepts (the core's random streams are keyed by a u64).
MAX_SEED = 2**64 - 1

ParamType = Literal["float", "int", "bool"]


def shown(value: Any) -> str:
    if isinstance(value, np.generic):
        value = value.item()
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _bound(x: float) -> str:
    return "inf" if x == math.inf else "-inf" if x == -math.inf else f"{x:g}"


@dataclass(frozen=True)
class Parameter:
    """One tunable parameter: its type, its range and its default.

    A float's range is ``low``..``high`` (each end closed unless ``*_open``; infinite ends are
    open: a float parameter is always finite). An int's range is ``low``..``high`` inclusive.
    """

    name: str
    type: ParamType
    default: Any
    doc: str
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    @property
    def span(self) -> str:
        """The range as text: ``[0, 1)`` for floats, ``>= 1`` for ints."""
        if self.type == "bool":
            return "True or False"
        if self.type == "int":
            return f">= {int(self.low)}" if self.high == math.inf else f"in [{int(self.low)}, {int(self.high)}]"
        left = "(" if self.low_open or self.low == -math.inf else "["
        right = ")" if self.high_open or self.high == math.inf else "]"
        return f"{left}{_bound(self.low)}, {_bound(self.high)}{right}"

    def contains(self, value: float) -> bool:
        """Whether a number of the right type lies in the range (NaN never does)."""
        if self.type == "float" and not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return bool(above and below)

    def check(self, value: Any, argument: str | None = None) -> Any:
        """``value`` as this parameter's type, or a typed error naming ``argument`` (default: the
        parameter's name) and the value."""
        arg = argument or self.name
        if self.type == "bool":
            if not isinstance(value, (bool, np.bool_)):
                raise InvalidTypeError(f"{arg}: must be a bool, got {shown(value)}", arg)
            return bool(value)
        if isinstance(value, (bool, np.bool_)):
            raise InvalidTypeError(
                f"{arg}: must be {'an integer' if self.type == 'int' else 'a real number'}, got {shown(value)}", arg
            )
        if self.type == "int":
            if not isinstance(value, numbers.Integral):
                raise InvalidTypeError(f"{arg}: must be an integer, got {shown(value)}", arg)
            v: float = int(value)
            if not self.contains(v):
                bound = f">= {int(self.low)}" if v < self.low else f"<= {int(self.high)}"
                raise InvalidArgumentError(f"{arg}: must be an integer {bound}, got {shown(value)}", arg)
            return int(value)
        if not isinstance(value, numbers.Real):
            raise InvalidTypeError(f"{arg}: must be a real number, got {shown(value)}", arg)
        v = float(value)
        if not self.contains(v):
            raise InvalidArgumentError(f"{arg}: must lie in {self.span}, got {shown(value)}", arg)
        return v


# ---------------------------------------------------------------------------------------------
# Parameters. One definition per meaning: λ is the same λ in BOTS, the ρ sweep and the trainer.
# ---------------------------------------------------------------------------------------------

LAM = Parameter("lam", "float", 0.1, "λ, the discount of old evidence toward the prior", 0.0, 1.0)
RHO = Parameter("rho", "float", 0.1, "ρ, the weight of implicit evidence", 0.0, 1.0)
TARGET = Parameter("target", "float", 0.5, "p*, the target success rate", 0.0, 1.0)
THOMPSON = Parameter("thompson", "bool", True, "Thompson sampling from the posterior (else its mean)")
PSEUDO_ROLLOUTS = Parameter(
    "n_rollouts",
    "float",
    16.0,
    "n, the pseudo sample size of implicit evidence (rollouts per task)",
    0.0,
    low_open=True,
)
MOMENTUM = Parameter("momentum", "float", 0.9, "γ, the momentum of the interpolation's capability μ̃", 0.0, 1.0)
MIN_GAP = Parameter(
    "min_gap",
    "float",
    # The core's own floor (1e-6): below it the interpolation's division is not defined.
    _core.DEFAULT_MIN_GAP,
    "interpolation: batches whose mean references differ by less give no estimate",
    0.0,
    1.0,
    # Open at 0: a batch whose two reference means are equal (both references 0 on it is common)
    # must give no estimate, not a division by zero.
    low_open=True,
    high_open=True,
)
SEED = Parameter("seed", "int", 0, "the selector's random stream", 0, MAX_SEED)
ROLLOUTS = Parameter("n_rollouts", "int", 16, "rollouts per task; a group is kept when 0 < successes < n", 1)
OVERSAMPLE = Parameter("oversample", "float", 3.0, "generation batch as a multiple of the batch size", 1.0)
MAX_ROUNDS = Parameter("max_rounds", "int", 16, "generation batches per selection at most", 1)
TAU = Parameter(
    "tau", "float", 0.0, "τ: 0 takes the B tasks nearest p*; > 0 samples them from softmax(−|θ − p*| / τ)", 0.0
)
ADAPTIVE_RHO = Parameter("adaptive_rho", "bool", False, "halve ρ when the estimator's predictions miss by ≥ 0.25")
ADAPTIVE_LAM = Parameter("adaptive_lam", "bool", False, "scale λ by the learner's observed drift (within ×4)")

#: SPEED-RL's screening (its published defaults), which BOTS-Screen shares; the parameters only one
#: method takes are defined beside its class.
N_INIT = Parameter("n_init", "int", 4, "SPEED: screening rollouts per new prompt", 2)
N_CONTINUE = Parameter("n_continue", "int", 12, "SPEED: further rollouts per qualified prompt", 1)
GEN_RATIO = Parameter(
    "gen_ratio",
    "float",
    1.0,
    "SPEED: prompts screened per generation call, as a multiple of the batch size",
    0.0,
    low_open=True,
)
MAX_GEN_BATCHES = Parameter("max_gen_batches", "int", 50, "SPEED: generation calls per step at most", 1)
SCREENING_PARAMS = (N_INIT, N_CONTINUE, GEN_RATIO, MAX_GEN_BATCHES)

LAG_DISCOUNT = Parameter(
    "lag_discount",
    "float",
    1.0,
    "δ: evidence `policy_lag` policy versions old counts δ ** lag (1: off)",
    0.0,
    1.0,
    low_open=True,
)
#: bots-embed's regression: the prior precision of its weights (on features of unit mean square
#: norm, so the default gives a task's logit a prior standard deviation of 2).
PRIOR_PRECISION = Parameter(
    "prior_precision",
    "float",
    0.25,
    "bots-embed: the prior precision of the regression's weights",
    0.0,
    low_open=True,
)
#: Every shared parameter by name (the parameters of one method alone are defined beside its
#: class; ``n_rollouts`` is BOTS' real-valued one; dynamic sampling's is an int).
PARAMETERS: Mapping[str, Parameter] = MappingProxyType(
    {
        p.name: p
        for p in (
            LAM,
            RHO,
            TARGET,
            THOMPSON,
            PSEUDO_ROLLOUTS,
            MOMENTUM,
            MIN_GAP,
            SEED,
            LAG_DISCOUNT,
            PRIOR_PRECISION,
            OVERSAMPLE,
            MAX_ROUNDS,
            TAU,
            ADAPTIVE_RHO,
            ADAPTIVE_LAM,
            *SCREENING_PARAMS,
        )
    }
)
#: Every shared parameter: those by name, and dynamic sampling's integer ``n_rollouts``. A method
#: registered later may take any of them, but define no other parameter under one of their names.
CATALOGUE: tuple[Parameter, ...] = (*PARAMETERS.values(), ROLLOUTS)
#: The selection rule's further settings, which every BOTS-based method takes (off by default).
RULE_PARAMS = (TAU, ADAPTIVE_RHO, ADAPTIVE_LAM, LAG_DISCOUNT)
#: What every BOTS-based method takes: its posterior, estimator, sampling and selection rule.
BOTS_PARAMS = (LAM, RHO, TARGET, THOMPSON, PSEUDO_ROLLOUTS, MOMENTUM, MIN_GAP, SEED, *RULE_PARAMS)

#: The values the BOTS-MoPPS and BOTS-DOTS presets fix (the paper's appendix E.6): MoPPS is
#: explicit evidence only with no discount and Thompson sampling; DOTS the latest evidence only
#: (λ = ρ = 1), greedy on the posterior mean.
MOPPS_FIXED: Mapping[str, Any] = MappingProxyType({"lam": 0.0, "rho": 0.0, "thompson": True})
DOTS_FIXED: Mapping[str, Any] = MappingProxyType({"lam": 1.0, "rho": 1.0, "thompson": False})
