"""What a task-selection method declares, in the file of its class: a :class:`Method`, its
name and label, its parameters (each a :class:`~bots_rft.parameters.Parameter`), whether
it reads reference pass rates, its :class:`RolloutMode`, the further per-task signals it reads,
the class that implements it and its builder. :mod:`bots_rft.selector.registry` lists the
declarations and makes every entry point run them (:func:`bots_rft.selector.registry.register`).

This module sits below every method's file (each imports it) and below the registry (which
imports every method's file), so that declaring a method never imports the registry back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import TYPE_CHECKING, Any, Literal

import numpy.typing as npt

from ..errors import InvalidArgumentError
from ..parameters import Parameter
from ..parameters import shown as _shown

if TYPE_CHECKING:
    from .protocol import CountedRolloutFn, RolloutFn, Selector

__all__ = [
    "Builder",
    "Method",
    "MethodEntry",
    "References",
    "RolloutMode",
    "needs_rollout",
    "one_per_task",
    "references",
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
# What builders share: the checks of what a method's build is given.
# ---------------------------------------------------------------------------------------------


def references(m: MethodEntry, weak: Any, strong: Any) -> tuple[Any, Any] | None:
    """The reference pass rates (weak, strong) ``m`` was given, or None: both or neither, and
    present where ``m`` requires them."""
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


def needs_rollout(m: MethodEntry, rollout: Any) -> Any:
    """The rollout callback of a method that rolls out inside ``select``: refused when missing."""
    if rollout is None:
        raise InvalidArgumentError(
            f"rollout: the {m.name} method rolls out inside select and needs a rollout callback "
            "rollout(task_ids, counts)",
            "rollout",
        )
    return rollout


def one_per_task(selector: Any, num_tasks: int) -> Any:
    """A selector built from the references, refused when they do not hold one rate per task."""
    if selector.num_tasks != num_tasks:
        raise InvalidArgumentError(f"weak: has {selector.num_tasks} pass rates, expected num_tasks={num_tasks}", "weak")
    return selector
