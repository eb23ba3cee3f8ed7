"""The task-selection methods bots-rft implements: one table of what each method is and takes
(:class:`MethodEntry`, :data:`ENTRIES`), and the registry that pairs each entry with the class
that implements it and what builds its selector (:class:`Method`, :data:`METHODS`).

Every entry point reads this table rather than spelling methods itself: ``bots simulate``, ``bots
train`` and ``bots compare`` take their method names, defaults and ranges from it, and the
trainer's config and the simulator check their parameters with it. A method (:class:`MethodEntry`)
is

- a **name** (plus accepted aliases) and the label result tables print;
- its **parameters**: each a :class:`~bots_rft.parameters.Parameter` with its type, range and
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

Every method, built in or not, is one :class:`Method` (its entry, its class, its own parameters
and its builder, in the file of its class; :mod:`bots_rft.selector.method`) added with one line,
:func:`register`: this module's list of the built-in methods is those lines, and a method defined
elsewhere is added the same way. From then on ``bots simulate``, the trainer's config (each of its
parameters a key, checked against its range) and :func:`method` know it
(docs/adding-a-method.md). The contract test (``tests/selector/test_method_contract.py``) runs every
method through the battery every method passes.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..errors import InvalidArgumentError, InvalidTypeError
from ..estimators.base import DEFAULT_MIN_GAP
from ..parameters import CATALOGUE, PARAMETERS, Parameter
from ..parameters import shown as _shown
from .method import Method, MethodEntry, References, RolloutMode

if TYPE_CHECKING:
    from .protocol import RolloutFn, Selector

__all__ = [
    "Parameter",
    "RolloutMode",
    "register",
    "declared",
    "unregister",
    "load_entry_points",
    "ENTRY_POINT_GROUP",
    "dynamic_sampling",
    "Method",
    "MethodEntry",
    "References",
    "METHODS",
    "PARAMETERS",
    "BUILT_IN_PARAMETERS",
    "DEFAULT_MIN_GAP",
    "method",
    "method_names",
    "ENTRIES",
    "entry",
]

#: The methods by canonical name, in the order they were registered; each one's table entry alone.
_METHODS: dict[str, Method] = {}
METHODS: Mapping[str, Method] = MappingProxyType(_METHODS)
_ENTRIES: dict[str, MethodEntry] = {}
ENTRIES: Mapping[str, MethodEntry] = MappingProxyType(_ENTRIES)
_BY_NAME: dict[str, MethodEntry] = {}


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


def method(name: Any, argument: str = "method") -> Method:
    """The method ``name`` (or an alias of it) names; an unknown one is an
    :class:`InvalidArgumentError` naming ``argument``, the value and the known names."""
    return METHODS[entry(name, argument).name]


def register(m: Method) -> Method:
    """Add the method ``m`` to the registry, so that every entry point runs it: ``bots
    simulate``'s and ``bots train``'s method lists, their configs (each parameter of ``m`` a key,
    checked against its range) and :func:`method`. A name or alias already taken, or a parameter
    named like one of the catalogue's (:data:`bots_rft.parameters.PARAMETERS`) but
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
        if known is not None and p != known and p not in CATALOGUE:
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
    if m.name in _BUILT_IN:
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
    """The catalogue's parameter ``name`` (:data:`~bots_rft.parameters.PARAMETERS`), or
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
    from .peers.dapo import METHOD as dapo
    from .peers.dapo import DynamicSampling

    own = dapo.check({p.name: params[p.name] for p in dapo.params if p.name in params})
    return DynamicSampling(num_tasks, rollout, proposer=proposer, **own)


def declared(target: str) -> Method:
    """The :class:`Method` that ``"module:NAME"`` names (the form of an entry point)."""
    module, _, name = target.partition(":")
    found: Method = getattr(importlib.import_module(module), name)
    return found


# The built-in methods, in the order the trainer and the simulator list them: one line each, the
# same register() a method defined elsewhere is added with.
register(declared("bots_rft.selector.bots.methods:BOTS_METHOD"))
register(declared("bots_rft.selector.bots.methods:PLAN"))
register(declared("bots_rft.selector.screen:METHOD"))
register(declared("bots_rft.selector.static:RANDOM"))
register(declared("bots_rft.selector.static:OFFLINE"))
register(declared("bots_rft.selector.static:REFERENCE_FILTER"))
register(declared("bots_rft.selector.bots.methods:MOPPS"))
register(declared("bots_rft.selector.bots.methods:DOTS"))
register(declared("bots_rft.selector.peers.dapo:METHOD"))
register(declared("bots_rft.selector.bots.methods:MULTIREF"))
register(declared("bots_rft.selector.bots.methods:SIMILARITY"))
register(declared("bots_rft.selector.bots.methods:EMBEDDING_REGRESSION"))
register(declared("bots_rft.selector.peers.dps:METHOD"))
register(declared("bots_rft.selector.peers.greso:METHOD"))
register(declared("bots_rft.selector.peers.speed:METHOD"))
register(declared("bots_rft.selector.peers.adarft:METHOD"))
register(declared("bots_rft.selector.peers.knapsack:METHOD"))
register(declared("bots_rft.selector.peers.reinforce_ada:METHOD"))

#: The built-in methods (those registered above), which :func:`unregister` keeps.
_BUILT_IN = frozenset(_METHODS)
#: Every parameter of the catalogue and of the built-in methods, by name (the trainer's config
#: has a key for each; a method registered later adds its own to ``method_params``).
BUILT_IN_PARAMETERS: Mapping[str, Parameter] = MappingProxyType(parameters())
