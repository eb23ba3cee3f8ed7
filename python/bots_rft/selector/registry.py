"""The registry of task-selection methods: each entry of the method table
(:mod:`bots_rft.selector.method_table`: names, parameters, defaults, ranges, references, checkpoint file)
paired with the class that implements it and what builds its selector.

:data:`METHODS` holds every method as a :class:`Method`: its table entry (every field of
:class:`~bots_rft.selector.method_table.MethodEntry`, and its checks) plus the **class** that implements it
(:attr:`Method.implementation`, ``"module:qualified name"``) and :meth:`Method.build`, which makes
the selector ``bots simulate`` or ``bots train`` runs. A method that rolls out gets the
``rollout`` callback at :meth:`Method.build`; the further per-task signals it reads are passed as
``signals=``.

The selector modules are imported when a method is built, not when this module is imported, so
that reading the registry costs no more than reading the table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy.typing as npt

from ..errors import InvalidArgumentError
from ..estimators.base import DEFAULT_MIN_GAP
from .method_table import ENTRIES, MethodEntry, References, entry, method_names
from .parameters import PARAMETERS, Parameter

if TYPE_CHECKING:
    from .protocol import CountedRolloutFn, RolloutFn, Selector

__all__ = [
    "Parameter",
    "Method",
    "MethodEntry",
    "References",
    "METHODS",
    "PARAMETERS",
    "DEFAULT_MIN_GAP",
    "method",
    "method_names",
]


@dataclass(frozen=True)
class Method(MethodEntry):
    """One selection method: its table entry, the class that implements it and its builder."""

    implementation: str = field(kw_only=True)  # "module:qualified name" of the class or preset that builds it

    @classmethod
    def registered(cls, listed: MethodEntry, implementation: str) -> Method:
        """The table entry ``listed``, implemented by ``implementation``."""
        return cls(**{f.name: getattr(listed, f.name) for f in fields(MethodEntry)}, implementation=implementation)

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
        return _BUILDERS[self.name](self, num_tasks, weak, strong, rollout, threads, self.check(params), **extra)


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

    if embeddings is None:
        raise InvalidArgumentError(
            f"signals: the {m.name} method needs signals['embeddings'], an [N, d] matrix", "signals"
        )
    evidence = Similarity(embeddings)
    return _bots(n, p, evidence, threads)


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
    "dps": "bots_rft.selector.peers.dps:DynamicsPredictiveSampling",
    "greso": "bots_rft.selector.peers.greso:GRESO",
    "speed": "bots_rft.selector.peers.speed:SpeedRL",
    "adarft": "bots_rft.selector.peers.adarft:AdaRFT",
    "knapsack": "bots_rft.selector.peers.knapsack:KnapsackAllocation",
    "reinforce-ada": "bots_rft.selector.peers.reinforce_ada:ReinforceAda",
}

#: The methods, by canonical name, in the order the trainer lists them (the table's order).
METHODS: Mapping[str, Method] = MappingProxyType(
    {name: Method.registered(listed, _IMPLEMENTATIONS[name]) for name, listed in ENTRIES.items()}
)


def method(name: Any, argument: str = "method") -> Method:
    """The method ``name`` (or an alias of it) names; an unknown one is an
    :class:`InvalidArgumentError` naming ``argument``, the value and the known names."""
    return METHODS[entry(name, argument).name]
