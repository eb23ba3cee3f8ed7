"""Selectors across processes: a Ray actor that owns one, and a check that moving one is cheap.

A :class:`bots_rft.BOTS` pickles through its state dict: a few hundred bytes of parameters plus
its arrays (α, β, per-task priors, the estimator's float32 references), which numpy hands to
pickle protocol 5 as out-of-band buffers. Ray (whose object store uses protocol 5 that way) and
``multiprocessing`` therefore move a selector as raw buffers, never as per-task Python objects;
:func:`pickled_sizes` shows the split. The samplers of the TRL and verl integrations pickle the
same way (a selector plus int64 arrays).

Where the selector should live in a Ray job: next to the trainer's driver loop if that loop
selects and updates (verl's single-controller trainer does; there the sampler already lives in the
driver). When rollouts are produced by several actors that report results on their own, keep one
:class:`SelectorActor` (``remote_selector(sel)``) so every update and selection is serialised
through one owner, in one order.

When the pool itself outgrows one process (10^8–10^9 tasks), :class:`ShardedBOTS` spreads it
over Ray actors, one contiguous shard each, with selections identical to one :class:`BOTS`.
"""

from __future__ import annotations

import pickle
from typing import Any

# ShardedBOTS is one of the selector backends; it is re-exported here, beside the Ray actors its
# shards run as, for the code that imports it with the rest of the Ray integration.
from ..selector.backends.sharded import SHARDED_PARAMS, ShardedBOTS, ShardLostError

__all__ = ["SelectorActor", "remote_selector", "pickled_sizes", "ShardedBOTS", "ShardLostError", "SHARDED_PARAMS"]


class SelectorActor:
    """Owns one selector and exposes its API; wrap with ``ray.remote`` (see :func:`remote_selector`).

    Calls on one actor run one at a time in arrival order, which keeps the selector's
    select/update sequence, and so its results, deterministic for a given call order.
    """

    def __init__(self, selector: Any) -> None:
        self.selector = selector

    def select(self, batch_size: int, exclude: Any = None) -> Any:
        return self.selector.select(batch_size, exclude=exclude)

    def update(self, task_ids: Any, successes: Any, trials: Any, predicted: Any = None) -> None:
        self.selector.update(task_ids, successes, trials, predicted)

    def update_rewards(self, task_ids: Any, rewards: Any) -> None:
        self.selector.update_rewards(task_ids, rewards)

    def state_dict(self) -> dict[str, Any]:
        return dict(self.selector.state_dict())

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.selector.load_state_dict(state)

    def save(self, path: str) -> None:
        self.selector.save(path)

    def get(self) -> Any:
        """The selector itself (pickled back to the caller)."""
        return self.selector


def remote_selector(selector: Any, **actor_options: Any) -> Any:
    """A Ray actor handle owning ``selector`` (``ray.init`` must have run). ``actor_options`` go
    to ``ray.remote`` (e.g. ``num_cpus=1``; the core uses that many threads only if the
    selector was built with ``threads=``)."""
    import ray

    cls = ray.remote(**actor_options)(SelectorActor) if actor_options else ray.remote(SelectorActor)
    return cls.remote(selector)


def pickled_sizes(obj: Any) -> tuple[int, int, int]:
    """``(in-band bytes, out-of-band bytes, out-of-band buffers)`` of ``obj`` under pickle
    protocol 5 with a ``buffer_callback``: how much is Python-pickled vs passed as raw buffers."""
    buffers: list[pickle.PickleBuffer] = []
    inband = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    return len(inband), sum(memoryview(b).nbytes for b in buffers), len(buffers)
