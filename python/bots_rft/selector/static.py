"""The selectors that do not learn from rollouts, BOTS's points of reference:

- :class:`RandomSelector`: uniform without replacement within each batch;
- :class:`OfflineSelector`: a static easy→hard curriculum by the strong reference pass rate (ties
  by the weak one), served in order (the paper's appendix E.6);
- :class:`ReferenceFilterSelector`: uniform over the tasks the references do not place at 0 or 1
  (the same information BOTS's implicit evidence reads, used once, without online updating; BOTS
  minus this arm measures what the Bayesian updating adds).

All follow the :class:`~bots_rft.selector.protocol.Selector` protocol and still check the
feedback they ignore, like every selector. BOTS-MoPPS and BOTS-DOTS are presets of :class:`bots_rft.BOTS`
(``BOTS.mopps`` / ``BOTS.dots``); the selectors from the literature (DAPO's dynamic sampling,
DPS, GRESO, SPEED-RL, AdaRFT, Knapsack-RL, Reinforce-Ada) are in :mod:`bots_rft.selector.peers`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import batch_size as _check_batch
from .._validation import feedback, rates_or_nan, selectable
from ..errors import CheckpointError, InvalidArgumentError
from ..parameters import SEED
from .method import Method, one_per_task, references
from .protocol import IdArray, check_num_tasks, check_state

__all__ = ["RandomSelector", "OfflineSelector", "ReferenceFilterSelector"]


class RandomSelector:
    """Uniform selection without replacement within each batch (the paper's reference baseline).

    Batches are independent, so a task can appear in consecutive batches.
    """

    kind = "random"

    def __init__(self, num_tasks: int, *, seed: int = SEED.default) -> None:
        self.num_tasks = check_num_tasks(num_tasks)
        self.seed = SEED.check(seed)
        self._rng = np.random.default_rng(self.seed)

    def select(self, batch_size: int, exclude: object = None) -> IdArray:
        allowed = selectable(exclude, self.num_tasks)
        if allowed is None:
            b = _check_batch(batch_size, self.num_tasks)
            return np.asarray(self._rng.choice(self.num_tasks, size=b, replace=False), np.int64)
        pool = np.flatnonzero(allowed)
        b = _check_batch(batch_size, pool.size)
        return np.asarray(self._rng.choice(pool, size=b, replace=False), dtype=np.int64)

    def update(self, task_ids: object, successes: object, trials: object, predicted: object = None) -> None:
        # Random ignores feedback, but still rejects malformed input like every selector.
        feedback(task_ids, successes, trials, self.num_tasks)

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "num_tasks": self.num_tasks,
            "seed": self.seed,
            "rng": self._rng.bit_generator.state,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        st = check_state(state, self.kind, self.num_tasks)
        rng = np.random.default_rng()
        try:
            rng.bit_generator.state = st["rng"]
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"state: has an invalid rng entry ({exc})") from exc
        self._rng, self.seed = rng, int(st.get("seed", self.seed))


class OfflineSelector:
    """A static curriculum: tasks sorted once from easy to hard and served in that order.

    Easy means a high strong-reference pass rate; ties go to the higher weak-reference pass
    rate, then to the lower index. Tasks without a strong reference (NaN) come last. After the
    last task the order starts over (a new epoch).
    """

    kind = "offline"

    def __init__(self, weak: object, strong: object) -> None:
        w = rates_or_nan(weak, "weak")
        s = rates_or_nan(strong, "strong", len(w))
        if w.size == 0:
            raise InvalidArgumentError("weak: must hold the pass rates of at least one task, got none", "weak")
        self.num_tasks = int(w.size)
        # lexsort: last key is primary. Negate for descending; NaN sorts last either way.
        self.order: IdArray = np.lexsort(
            (
                np.arange(self.num_tasks),
                -np.nan_to_num(w, nan=-np.inf),
                np.isnan(w),
                -s,
            )
        ).astype(np.int64)
        self._cursor = 0

    def select(self, batch_size: int, exclude: object = None) -> IdArray:
        allowed = selectable(exclude, self.num_tasks)
        available = self.num_tasks if allowed is None else int(allowed.sum())
        b = _check_batch(batch_size, available)
        # Walk the curriculum from the cursor, wrapping, skipping excluded tasks.
        rolled = np.roll(self.order, -self._cursor)
        if allowed is None:
            take = rolled[:b]
            self._cursor = (self._cursor + b) % self.num_tasks
        else:
            ok = np.flatnonzero(allowed[rolled])[:b]
            take = rolled[ok]
            self._cursor = (self._cursor + int(ok[-1]) + 1) % self.num_tasks
        return np.array(take, dtype=np.int64)

    def update(self, task_ids: object, successes: object, trials: object, predicted: object = None) -> None:
        feedback(task_ids, successes, trials, self.num_tasks)

    def state_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "num_tasks": self.num_tasks, "cursor": self._cursor}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        st = check_state(state, self.kind, self.num_tasks)
        cursor = st.get("cursor")
        if isinstance(cursor, bool) or not isinstance(cursor, int) or not 0 <= cursor < self.num_tasks:
            raise CheckpointError(
                f"state: has an invalid cursor {cursor!r} (the curriculum has {self.num_tasks} tasks)"
            )
        self._cursor = cursor


class ReferenceFilterSelector(RandomSelector):
    """Uniform selection (without replacement within each batch) over the tasks whose reference
    pass rates place them strictly inside (0, 1): a task is dropped when both references solve it
    every time (weak = strong = 1) or never (weak = strong = 0), the two cases whose rollouts are
    expected to carry no GRPO signal for a policy between the references. A task with a missing
    (NaN) reference is kept. When fewer kept tasks than the batch remain selectable, the batch is
    filled uniformly from the dropped ones.

    It reads the same reference pass rates as BOTS's implicit evidence and nothing else, and never
    updates: the control arm that separates what BOTS's online updating adds from what the
    references alone give."""

    kind = "reference-filter"

    def __init__(self, weak: object, strong: object, *, seed: int = SEED.default) -> None:
        w = rates_or_nan(weak, "weak")
        s = rates_or_nan(strong, "strong", len(w))
        if w.size == 0:
            raise InvalidArgumentError("weak: must hold the pass rates of at least one task, got none", "weak")
        super().__init__(int(w.size), seed=seed)
        both_solved = (w == 1.0) & (s == 1.0)
        both_failed = (w == 0.0) & (s == 0.0)
        #: True for the tasks this arm samples from.
        self.kept: np.ndarray = ~(both_solved | both_failed)

    def select(self, batch_size: int, exclude: object = None) -> IdArray:
        allowed = selectable(exclude, self.num_tasks)
        usable = np.ones(self.num_tasks, dtype=bool) if allowed is None else allowed
        b = _check_batch(batch_size, int(usable.sum()))
        kept = np.flatnonzero(usable & self.kept)
        if kept.size >= b:
            return np.asarray(self._rng.choice(kept, size=b, replace=False), dtype=np.int64)
        rest = np.flatnonzero(usable & ~self.kept)
        fill = self._rng.choice(rest, size=b - kept.size, replace=False)
        return np.asarray(np.concatenate([kept, fill]), dtype=np.int64)


def _build_random(
    m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]
) -> RandomSelector:
    return RandomSelector(n, seed=p["seed"])


def _build_offline(
    m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]
) -> OfflineSelector:
    refs = references(m, weak, strong)
    assert refs is not None  # required
    return one_per_task(OfflineSelector(*refs), n)  # type: ignore[no-any-return]


def _build_reference_filter(
    m: Method, n: int, weak: Any, strong: Any, rollout: Any, threads: Any, p: dict[str, Any]
) -> ReferenceFilterSelector:
    refs = references(m, weak, strong)
    assert refs is not None  # required
    return one_per_task(ReferenceFilterSelector(*refs, seed=p["seed"]), n)  # type: ignore[no-any-return]


RANDOM = Method(
    name="random",
    label="Random",
    summary="uniform without replacement within each batch",
    params=(SEED,),
    references="unused",
    implementation="bots_rft.selector.static:RandomSelector",
    builder=_build_random,
)
OFFLINE = Method(
    name="offline",
    label="Offline",
    summary="a static easy-to-hard curriculum by the strong reference pass rate",
    params=(),
    references="required",
    implementation="bots_rft.selector.static:OfflineSelector",
    builder=_build_offline,
)
REFERENCE_FILTER = Method(
    name="reference-filter",
    label="Ref-filter",
    summary="uniform over the tasks the weak and strong references do not both solve always or "
    "never: the references' information without online updating (a control arm for BOTS)",
    params=(SEED,),
    references="required",
    implementation="bots_rft.selector.static:ReferenceFilterSelector",
    builder=_build_reference_filter,
)
