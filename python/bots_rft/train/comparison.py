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

The references are the warm-up's own model after ``weak_sft_steps`` and ``strong_sft_steps``
steps; the policy starts after ``sft_steps``. The weak reference may be the policy's starting
point itself (``weak_sft_steps == sft_steps``): the policy then starts on the weak reference and
moves toward the strong one, the bracket the interpolation assumes. Their pass rates on every training task are measured by
sampling, as ``bots refeval`` does, into the columns ``weak_sft<k>_pass_rate`` and
``strong_sft<k>_pass_rate`` of OUT/pool/train.parquet, and become the config's ``weak_column`` and
``strong_column``: the methods that use reference pass rates (``bots``, ``dots``, ``offline``)
see these; the others see none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..config_files import read_mapping
from ..errors import ConfigError

__all__ = ["PoolSpec", "ReferenceSpec", "CompareSpec", "read_compare_section", "SECTION"]

SECTION = "compare"


def _int(section: str, key: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{section}.{key}: expected an integer >= {low}, got {value!r}")
    return value


def _known(section: str, data: Mapping[str, Any], known: Sequence[str]) -> None:
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(f"{section}: unknown key(s) {unknown}; known keys are {sorted(known)}")


@dataclass(frozen=True)
class PoolSpec:
    """A procedural string pool (:func:`bots_rft.data.strings.build_string_pool`)."""

    tasks: int = 6000
    eval_tasks: int = 600
    seed: int = 0
    min_length: int = 2
    max_length: int = 12
    ops: dict[str, float] = field(default_factory=lambda: {"reverse": 1.0})

    @classmethod
    def parse(cls, data: Any) -> PoolSpec:
        where = f"{SECTION}.pool"
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {data!r}")
        _known(where, data, list(cls.__dataclass_fields__))
        spec = cls(**dict(data))
        for key, low in (("tasks", 2), ("eval_tasks", 1), ("seed", 0), ("min_length", 1), ("max_length", 1)):
            _int(where, key, getattr(spec, key), low)
        return spec


@dataclass(frozen=True)
class ReferenceSpec:
    """Weak and strong references: the warm-up after these many steps, measured with
    ``rollouts`` samples per training task."""

    weak_sft_steps: int
    strong_sft_steps: int
    rollouts: int = 8

    @classmethod
    def parse(cls, data: Any) -> ReferenceSpec:
        where = f"{SECTION}.references"
        if not isinstance(data, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {data!r}")
        _known(where, data, list(cls.__dataclass_fields__))
        missing = [k for k in ("weak_sft_steps", "strong_sft_steps") if k not in data]
        if missing:
            raise ConfigError(f"{where}: missing {missing}")
        spec = cls(**dict(data))
        _int(where, "weak_sft_steps", spec.weak_sft_steps, 1)
        _int(where, "strong_sft_steps", spec.strong_sft_steps, 1)
        _int(where, "rollouts", spec.rollouts, 1)
        if spec.weak_sft_steps >= spec.strong_sft_steps:
            raise ConfigError(
                f"{where}.weak_sft_steps: expected fewer than strong_sft_steps ({spec.strong_sft_steps}), "
                f"got {spec.weak_sft_steps}"
            )
        return spec

    @property
    def weak_column(self) -> str:
        return f"weak_sft{self.weak_sft_steps}_pass_rate"

    @property
    def strong_column(self) -> str:
        return f"strong_sft{self.strong_sft_steps}_pass_rate"


@dataclass(frozen=True)
class CompareSpec:
    """The ``compare:`` section (every key optional; the CLI's ``--methods``/``--seeds``/
    ``--jobs`` win over it)."""

    methods: tuple[str, ...] | None = None
    seeds: tuple[int, ...] | None = None
    jobs: int = 1
    pool: PoolSpec | None = None
    references: ReferenceSpec | None = None

    def record(self) -> dict[str, Any]:
        """What the pool and references depend on (compared on ``--reuse``)."""
        return {
            "pool": None if self.pool is None else asdict(self.pool),
            "references": None if self.references is None else asdict(self.references),
        }


def read_compare_section(path: str | Path | None) -> CompareSpec:
    """The ``compare:`` section of the config file at ``path`` (an empty spec when there is no
    file or no section)."""
    if path is None:
        return CompareSpec()
    data = read_mapping(Path(path)).get(SECTION)
    if data is None:
        return CompareSpec()
    if not isinstance(data, Mapping):
        raise ConfigError(f"{SECTION}: expected a mapping, got {data!r}")
    _known(SECTION, data, list(CompareSpec.__dataclass_fields__))
    methods = data.get("methods")
    if methods is not None and (
        not isinstance(methods, list) or not methods or not all(isinstance(m, str) and m for m in methods)
    ):
        raise ConfigError(f"{SECTION}.methods: expected a list of method names, got {methods!r}")
    seeds = data.get("seeds")
    if seeds is not None and (
        not isinstance(seeds, list)
        or not seeds
        or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in seeds)
        or len(set(seeds)) != len(seeds)
    ):
        raise ConfigError(f"{SECTION}.seeds: expected distinct non-negative integers, got {seeds!r}")
    return CompareSpec(
        methods=None if methods is None else tuple(methods),
        seeds=None if seeds is None else tuple(seeds),
        jobs=_int(SECTION, "jobs", data.get("jobs", 1), 1),
        pool=None if data.get("pool") is None else PoolSpec.parse(data["pool"]),
        references=None if data.get("references") is None else ReferenceSpec.parse(data["references"]),
    )
