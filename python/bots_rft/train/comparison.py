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
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator

from ..config_files import ConfigModel, Float, Int, Invalid, read_mapping
from ..errors import ConfigError

__all__ = ["PoolSpec", "ReferenceSpec", "DecisionSpec", "CompareSpec", "read_compare_section", "SECTION"]

SECTION = "compare"


class PoolSpec(ConfigModel):
    """A procedural string pool (:func:`bots_rft.data.strings.build_string_pool`)."""

    tasks: Annotated[Int, Field(ge=2)] = 6000
    eval_tasks: Annotated[Int, Field(ge=1)] = 600
    seed: Annotated[Int, Field(ge=0)] = 0
    min_length: Annotated[Int, Field(ge=1)] = 2
    max_length: Annotated[Int, Field(ge=1)] = 12
    ops: dict[str, Float] = Field(default_factory=lambda: {"reverse": 1.0})


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


class DecisionSpec(ConfigModel):
    """A decision rule fixed before the runs (:class:`bots_rft.report.trial.DecisionRule`): the
    methods it names must be among those compared."""

    method: str = "bots"
    baseline: str = "random"
    control: str | None = None
    refute_within: Annotated[Float, Field(ge=0, allow_inf_nan=False)] = 0.005

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
