"""What a ``bots compare`` config's ``compare:`` section asks for besides the training keys: the
methods and seeds, how many runs go side by side, a procedural pool to build, and weak/strong
reference models to measure on it, so that one command reproduces a whole comparison::

    compare:
      methods: [random, bots, mopps]
      seeds: [0, 1, 2, 3, 4]
      jobs: 2                      # runs trained side by side (one process each)
      pool:                        # built into OUT/pool (bots data strings)
        tasks: 6000
        eval_tasks: 600
        seed: 0
        max_length: 12
      references:                  # checkpoints of the one supervised warm-up stream
        weak_sft_steps: 200
        strong_sft_steps: 900
        rollouts: 8
      decision:                    # a decision rule fixed before the runs (all keys optional)
        method: bots
        baseline: random
        control: reference-filter  # the same information without the online part
        refute_within: 0.005

The references are the warm-up's own model after ``weak_sft_steps`` and ``strong_sft_steps``
steps; the policy starts after ``sft_steps``. With ``references.seed`` other than the config's
``seed`` they come from a second warm-up stream started from that seed (the same recipe, another
initialisation and batch order), so they are not the policy's own past or future. The weak reference may be the policy's starting
point itself (``weak_sft_steps == sft_steps``): the policy then starts on the weak reference and
moves toward the strong one, the bracket the interpolation assumes. Their pass rates on every training task are measured by
sampling, as ``bots refeval`` does, into the columns ``weak_sft<k>_pass_rate`` and
``strong_sft<k>_pass_rate`` of OUT/pool/train.parquet, and become the config's ``weak_column`` and
``strong_column``: the methods that use reference pass rates (``bots``, ``dots``, ``offline``)
see these; the others see none.

With ``decision``, the report gives the rule's verdict on the primary metric (each run's mean
held-out accuracy over its evaluations, ``method`` minus ``baseline`` paired by seed, 95% Student-t
interval): above 0 it "saves rollouts given these references" (and "the online part matters" when
``method`` minus ``control`` is above 0 too), below 0 it "costs accuracy", inside
±``refute_within`` it is "refuted at this scale", otherwise "inconclusive at this scale".

A ``decision`` may instead decide several contrasts together (without ``method``, ``baseline``,
``control`` or ``refute_within``)::

      decision:
        contrasts:                 # each A − B on the primary metric, paired by seed
          - {method: bots-embed, baseline: random, name: C4}   # name: default C1, C2, ...
          - {method: bots, baseline: random, name: C5}
        alpha: 0.05                # family-wise, over the contrasts
        equivalence: 0.0075        # the margin of "does not matter at this scale"
        correction: holm           # Holm's step-down (the only one)

Each contrast gets a two-sided paired t-test; the p-values sorted ascending, the i-th (from 0) of
m is rejected at ``alpha / (m - i)`` when every one before it was. Rejected, a contrast is
"supported" (mean above 0) or "harmful" (below 0); otherwise its 95% interval inside
±``equivalence`` "does not matter at this scale", else it is "inconclusive".

Two checks may gate how the contrasts are read (both optional, both reported whatever they find)::

        learning_check: random     # its gain over the run (mean held-out score after step 0 minus
                                   # step 0, per seed) needs a 95% interval above 0, else no
                                   # contrast is read: the runs did not learn enough to compare
        etr_margin: 0.05           # a contrast whose method's mean training ETR exceeds the
                                   # learning_check arm's by this or less: that method did not
                                   # change what it trained on, and the contrast says so
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, field_validator, model_serializer, model_validator

from ..config_files import ConfigModel, Float, Int, Invalid, read_mapping
from ..errors import ConfigError

__all__ = [
    "PoolSpec",
    "ReferenceSpec",
    "ContrastSpec",
    "DecisionSpec",
    "CompareSpec",
    "read_compare_section",
    "SECTION",
]

SECTION = "compare"


class PoolSpec(ConfigModel):
    """A procedural string pool (:func:`bots_rft.data.strings.build_string_pool`)."""

    tasks: Annotated[Int, Field(ge=2)] = 6000
    eval_tasks: Annotated[Int, Field(ge=1)] = 600
    seed: Annotated[Int, Field(ge=0)] = 0
    min_length: Annotated[Int, Field(ge=1)] = 2
    max_length: Annotated[Int, Field(ge=1)] = 12
    ops: dict[str, Float] = Field(default_factory=lambda: {"reverse": 1.0})
    # Train on a subset of the built training tasks: ``train_subset`` of them, the rows
    # ``numpy.random.default_rng(subset_seed).choice(tasks, train_subset, replace=False)`` in that
    # order. The warm-up and the reference models still learn from the whole training pool.
    train_subset: Annotated[Int, Field(ge=2)] | None = None
    subset_seed: Annotated[Int, Field(ge=0)] = 0

    @field_validator("train_subset")
    @classmethod
    def _within_pool(cls, size: int | None, info: Any) -> int | None:
        tasks = info.data.get("tasks")
        if size is not None and tasks is not None and size > tasks:
            raise Invalid(f"expected at most tasks ({tasks})")
        return size

    def subset_rows(self) -> list[int] | None:
        """The training rows the runs train on (None: all of them)."""
        if self.train_subset is None:
            return None
        import numpy as np

        rng = np.random.default_rng(self.subset_seed)
        return [int(r) for r in rng.choice(self.tasks, self.train_subset, replace=False)]

    def record(self) -> dict[str, Any]:
        """What the built pool depends on (compared on ``--reuse``); a pool without a subset
        records no subset keys, so it matches the record of any pool built without one."""
        data = self.to_dict()
        if self.train_subset is None:
            data.pop("train_subset", None)
            data.pop("subset_seed", None)
        return data


class ReferenceSpec(ConfigModel):
    """Weak and strong references: a warm-up after these many steps, measured with ``rollouts``
    samples per training task. ``seed`` (default: the config's ``seed``, i.e. the policy's own
    warm-up stream) set to another value trains the references in a separate warm-up stream from
    that seed: references independent of the policy's starting point."""

    # The strong reference first: the weak one is checked against it.
    strong_sft_steps: Annotated[Int, Field(ge=1)]
    weak_sft_steps: Annotated[Int, Field(ge=1)]
    rollouts: Annotated[Int, Field(ge=1)] = 8
    seed: Annotated[Int, Field(ge=0)] | None = None

    @field_validator("weak_sft_steps")
    @classmethod
    def _weaker(cls, weak: int, info: Any) -> int:
        strong = info.data.get("strong_sft_steps")
        if strong is not None and weak >= strong:
            raise Invalid(f"expected fewer than strong_sft_steps ({strong})")
        return weak

    @property
    def weak_column(self) -> str:
        return f"weak_sft{self.weak_sft_steps}_pass_rate"

    @property
    def strong_column(self) -> str:
        return f"strong_sft{self.strong_sft_steps}_pass_rate"


class ContrastSpec(ConfigModel):
    """One contrast of ``compare.decision.contrasts``: ``method`` minus ``baseline`` (two of the
    compared methods), named ``name`` (default C1, C2, ... by its place in the list)."""

    method: str
    baseline: str
    name: str | None = None

    @field_validator("baseline")
    @classmethod
    def _other_than_method(cls, name: str, info: Any) -> str:
        if name == info.data.get("method"):
            raise Invalid(f"expected a method other than method ({name})")
        return name

    @field_validator("name")
    @classmethod
    def _named(cls, name: str | None) -> str | None:
        if name is not None and not name.strip():
            raise Invalid("expected a non-empty name")
        return name


_SINGLE_KEYS = ("method", "baseline", "control", "refute_within")
_CONTRAST_KEYS = ("contrasts", "alpha", "equivalence", "correction", "learning_check", "etr_margin")


class DecisionSpec(ConfigModel):
    """A decision rule fixed before the runs: the methods it names must be among those compared.

    Either one comparison (:class:`bots_rft.report.trial.DecisionRule`): ``method`` against
    ``baseline`` (and ``control``), refuted inside ±``refute_within``; or, with ``contrasts``,
    several decided together (:class:`bots_rft.report.trial.ContrastRule`): each a
    :class:`ContrastSpec`, two-sided paired t-tests with Holm's ``correction`` at family-wise
    ``alpha``, "does not matter at this scale" inside ±``equivalence``. ``contrasts`` and the
    single comparison's keys are not given together."""

    # ``contrasts`` first: the single comparison's keys are checked against it.
    contrasts: tuple[ContrastSpec, ...] | None = None
    alpha: Annotated[Float, Field(gt=0, lt=1)] = 0.05
    equivalence: Annotated[Float, Field(ge=0, allow_inf_nan=False)] = 0.0075
    correction: Literal["holm"] = "holm"
    learning_check: str | None = None
    etr_margin: Annotated[Float, Field(ge=0, allow_inf_nan=False)] | None = None
    method: str | None = "bots"
    baseline: str | None = "random"
    control: str | None = None
    refute_within: Annotated[Float, Field(ge=0, allow_inf_nan=False)] = 0.005

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # The keys of the kind of rule given, only: a rule without contrasts dumps none of the
        # contrast keys (its dump is the config it was read from), and either dump reads back
        # (``CompareSpec.replace``).
        data: dict[str, Any] = handler(self)
        drop = _CONTRAST_KEYS if self.contrasts is None else _SINGLE_KEYS
        return {k: v for k, v in data.items() if k not in drop}

    @model_validator(mode="before")
    @classmethod
    def _no_single_method(cls, data: Any) -> Any:
        # With contrasts there is no single method and baseline (None, so none is checked).
        if isinstance(data, Mapping) and data.get("contrasts") is not None:
            return {"method": None, "baseline": None, **data}
        return data

    @field_validator("contrasts", mode="before")
    @classmethod
    def _contrast_list(cls, contrasts: Any) -> Any:
        if contrasts is None:
            return None
        if not isinstance(contrasts, (list, tuple)) or not contrasts:
            raise Invalid("expected a list of one or more {method: A, baseline: B}")
        known = sorted(ContrastSpec.model_fields)
        for i, c in enumerate(contrasts):
            if not isinstance(c, Mapping):
                raise Invalid(f"contrast {i} is no mapping; expected {{method: A, baseline: B}}")
            unknown = sorted(str(k) for k in c if k not in known)
            if unknown:
                raise Invalid(f"contrast {i} has unknown key(s) {unknown}; known keys: {known}")
        return contrasts

    @field_validator("contrasts")
    @classmethod
    def _distinct(cls, contrasts: tuple[ContrastSpec, ...] | None) -> tuple[ContrastSpec, ...] | None:
        if contrasts is not None:
            names = [c.name or f"C{i + 1}" for i, c in enumerate(contrasts)]
            twice = sorted({n for n in names if names.count(n) > 1})
            if twice:
                raise Invalid(f"expected one name per contrast ({', '.join(twice)} named twice)")
            pairs = [f"{c.method} − {c.baseline}" for c in contrasts]
            again = sorted({p for p in pairs if pairs.count(p) > 1})
            if again:
                raise Invalid(f"expected distinct contrasts ({', '.join(again)} given twice)")
        return contrasts

    @field_validator(*_CONTRAST_KEYS[1:])
    @classmethod
    def _only_with_contrasts(cls, value: Any, info: Any) -> Any:
        if "contrasts" in info.data and info.data["contrasts"] is None:
            raise Invalid("only with contrasts (method/baseline/control/refute_within decide without it)")
        return value

    @field_validator("etr_margin")
    @classmethod
    def _margin_of_arm(cls, margin: float | None, info: Any) -> float | None:
        if margin is not None and info.data.get("learning_check") is None:
            raise Invalid("needs learning_check (the arm whose training ETR the margin is over)")
        return margin

    @field_validator(*_SINGLE_KEYS)
    @classmethod
    def _not_with_contrasts(cls, value: Any, info: Any) -> Any:
        if info.data.get("contrasts") is not None:
            if value is not None:
                raise Invalid("not with contrasts (give contrasts, or method/baseline/control/refute_within)")
        elif value is None and info.field_name in ("method", "baseline"):
            raise Invalid("expected a method name")
        return value

    @field_validator("baseline", "control")
    @classmethod
    def _other_than_method(cls, name: str | None, info: Any) -> str | None:
        if name is not None and name == info.data.get("method"):
            raise Invalid(f"expected a method other than method ({name})")
        return name


class CompareSpec(ConfigModel):
    """The ``compare:`` section (every key optional; the CLI's ``--methods``/``--seeds``/
    ``--jobs`` win over it)."""

    section = SECTION

    methods: tuple[str, ...] | None = None
    seeds: tuple[Int, ...] | None = None
    jobs: Annotated[Int, Field(ge=1)] = 1
    pool: PoolSpec | None = None
    references: ReferenceSpec | None = None
    decision: DecisionSpec | None = None

    @field_validator("methods", mode="before")
    @classmethod
    def _method_names(cls, methods: Any) -> Any:
        if methods is not None and (
            not isinstance(methods, (list, tuple)) or not methods or not all(isinstance(m, str) and m for m in methods)
        ):
            raise Invalid("expected a list of method names")
        return methods

    @field_validator("seeds", mode="before")
    @classmethod
    def _distinct_seeds(cls, seeds: Any) -> Any:
        if seeds is not None and (
            not isinstance(seeds, (list, tuple))
            or not seeds
            or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds)
            or len(set(seeds)) != len(seeds)
        ):
            raise Invalid("expected distinct non-negative integers")
        return seeds

    def record(self) -> dict[str, Any]:
        """What the pool and references depend on (compared on ``--reuse``)."""
        return {
            "pool": None if self.pool is None else self.pool.to_dict(),
            "references": None if self.references is None else self.references.to_dict(),
        }


def read_compare_section(path: str | Path | None) -> CompareSpec:
    """The ``compare:`` section of the config file at ``path`` (an empty spec when there is no
    file or no section); a bad key or value is one :class:`ConfigError` line naming it
    (``compare.jobs: must be an integer >= 1, got 0``)."""
    if path is None:
        return CompareSpec()
    data = read_mapping(Path(path)).get(SECTION)
    if data is None:
        return CompareSpec()
    if not isinstance(data, Mapping):
        raise ConfigError(f"{SECTION}: expected a mapping, got {data!r}")
    return CompareSpec(**{str(k): v for k, v in data.items()})
