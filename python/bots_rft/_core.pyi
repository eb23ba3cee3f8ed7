"""Type stubs for the compiled core (rust/bots-py). Checked by ``mypy.stubtest`` in ``make lint``."""

from typing import Any, final

import numpy as np
import numpy.typing as npt
from typing_extensions import deprecated

__all__ = [
    "Batch",
    "CHUNK",
    "DEFAULT_MIN_GAP",
    "aggregate",
    "available_backends",
    "available_simd_paths",
    "backend",
    "batch_capability",
    "beta_draws",
    "check_predicted",
    "frozen",
    "Pass",
    "Posterior",
    "SelectSpec",
    "Snapshot",
    "UpdateSpec",
    "select",
    "set_backend",
    "set_simd_path",
    "simd_path",
    "thompson_draws",
    "thompson_draws_at",
    "thread_count",
    "__version__",
]

CHUNK: int
DEFAULT_MIN_GAP: float
__version__: str

@final
class Batch:
    """One step's rollout results, validated, repeated task ids summed, sorted by id."""

    @property
    def ids(self) -> npt.NDArray[np.int64]: ...
    @property
    def successes(self) -> npt.NDArray[np.float64]: ...
    @property
    def trials(self) -> npt.NDArray[np.float64]: ...
    def __len__(self) -> int: ...

def aggregate(
    num_tasks: int,
    task_ids: npt.NDArray[np.int64],
    successes: npt.NDArray[np.float64],
    trials: npt.NDArray[np.float64],
) -> Batch: ...
def batch_capability(
    batch: Batch, weak: npt.NDArray[np.float32], strong: npt.NDArray[np.float32], min_gap: float = 1e-06
) -> float | None: ...
def check_predicted(predicted: npt.NDArray[np.float64], num_tasks: int) -> None: ...
def frozen(array: npt.NDArray[np.float64] | npt.NDArray[np.float32]) -> npt.NDArray[Any]: ...

@final
class UpdateSpec:
    """One step's posterior update: explicit evidence, priors, λ, ρ, n and implicit evidence."""

    def __new__(
        cls,
        batch: Batch,
        *,
        prior_alpha: float | npt.NDArray[np.float64] = ...,
        prior_beta: float | npt.NDArray[np.float64] = ...,
        lam: float = 0.0,
        rho: float = 0.0,
        n_rollouts: float = 1.0,
        predicted: npt.NDArray[np.float64] | None = None,
        weak: npt.NDArray[np.float32] | None = None,
        strong: npt.NDArray[np.float32] | None = None,
        capability: float | None = None,
    ) -> UpdateSpec: ...

@final
class SelectSpec:
    """One selection: k tasks nearest the target, from stream (seed, counter), exclusions applied."""

    def __new__(
        cls,
        k: int,
        *,
        target: float = 0.5,
        thompson: bool = True,
        seed: int = 0,
        counter: int = 0,
        exclude_mask: npt.NDArray[np.bool_] | None = None,
        exclude_ids: npt.NDArray[np.int64] | None = None,
        bound_hint: float | None = None,
        tau: float | None = None,
        first_index: int = 0,
    ) -> SelectSpec: ...
    @property
    def k(self) -> int: ...
    @property
    def first_index(self) -> int: ...

#: (ids best first, distance of the last selected, each selected task's distance to the target).
_Selection = tuple[npt.NDArray[np.int64], float, npt.NDArray[np.float64]]

@final
class Snapshot:
    """Keeps one version of α or β alive for the read-only views made of it (their base)."""

@final
class Posterior:
    """α and β of every task, owned by the core: read through read-only snapshot views, changed
    only by passes and :meth:`assign`."""

    def __new__(cls, alpha: npt.NDArray[np.float64], beta: npt.NDArray[np.float64]) -> Posterior: ...
    def __len__(self) -> int: ...
    @property
    def alpha(self) -> npt.NDArray[np.float64]: ...
    @property
    def beta(self) -> npt.NDArray[np.float64]: ...
    def assign(self, alpha: npt.NDArray[np.float64], beta: npt.NDArray[np.float64]) -> None: ...
    def step(
        self,
        update: UpdateSpec | None = None,
        select: SelectSpec | None = None,
        *,
        threads: int | None = None,
    ) -> _Selection | None: ...
    def start_step(
        self,
        update: UpdateSpec | None = None,
        select: SelectSpec | None = None,
        *,
        threads: int | None = None,
        take: int | None = None,
    ) -> Pass: ...

@final
class Pass:
    """A pass started by :meth:`Posterior.start_step`, running in the background."""

    def done(self) -> bool: ...
    def wait(self) -> _Selection | None: ...
    def wait_take(self, k: int) -> tuple[npt.NDArray[np.int64] | None, float] | None: ...

def select(
    alpha: npt.NDArray[np.float64],
    beta: npt.NDArray[np.float64],
    select: SelectSpec,
    *,
    threads: int | None = None,
) -> tuple[npt.NDArray[np.int64], float]: ...
def beta_draws(a: float, b: float, size: int, seed: int) -> npt.NDArray[np.float64]: ...
def thompson_draws(
    alpha: npt.NDArray[np.float64],
    beta: npt.NDArray[np.float64],
    seed: int,
    counter: int,
    simd_path: str | None = None,
    threads: int | None = None,
) -> npt.NDArray[np.float32]: ...
def thompson_draws_at(
    alpha: npt.NDArray[np.float64],
    beta: npt.NDArray[np.float64],
    ids: npt.NDArray[np.int64],
    seed: int,
    counter: int,
) -> npt.NDArray[np.float32]: ...
def available_simd_paths() -> list[str]: ...
def simd_path() -> str: ...
def set_simd_path(name: str | None = None) -> None: ...
@deprecated("use available_simd_paths()")
def available_backends() -> list[str]: ...
@deprecated("use simd_path()")
def backend() -> str: ...
@deprecated("use set_simd_path()")
def set_backend(name: str | None = None) -> None: ...
def thread_count(threads: int | None = None) -> int: ...
