"""The completions of the methods that roll out inside their own selection (``greso``, ``speed``,
``knapsack``, ``reinforce-ada``, ``bots-screen``: :class:`bots_rft.selector.protocol.RollsOut`),
kept between the generation round that produced them and the GRPO update that trains on them.

The trainer hands such a selector a rollout callback; every call generates the completions it
asks for, scores them, and adds each task's rows to :class:`KeptRows` (a task rolled out in
several calls, such as SPEED-RL's screening and continuation, accumulates its rows in generation
order). After ``select``, each trained task's group is taken from its kept rows by
:func:`trained_rows`; rows of tasks the selector no longer queues are dropped at the end of the
step, and the queued ones are saved with each checkpoint (:meth:`KeptRows.state`: tensors in
the checkpoint codec's safetensors file, the rest as JSON in its metadata, through
:func:`bots_rft.train.run_checkpoint.save_tree`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import torch

from ..errors import CheckpointError, InvalidArgumentError
from .rollout import PlannedRollouts, Rollouts, merge_task_rows

__all__ = ["KeptRows", "trained_rows"]


def trained_rows(rewards: Sequence[float], successes: float, trials: int) -> list[int]:
    """The rows (positions in generation order) of a task's kept completions that its trained
    group of ``trials`` rollouts consists of: every row when there are ``trials`` of them; else
    the ``round(successes)`` highest-reward rows and, for the rest of the group, the
    lowest-reward rows (ties to the earlier row), in generation order. For Reinforce-Ada's
    balanced subset (binary rewards) that is its ``successes`` correct and ``trials - successes``
    incorrect rollouts."""
    m, t = len(rewards), int(trials)
    if t < 1 or t > m:
        raise InvalidArgumentError(f"trials: the selector trains on {t} rollouts of a task that has {m}", "trials")
    if t == m:
        return list(range(m))
    high = min(max(int(round(float(successes))), 0), t)
    best = sorted(range(m), key=lambda i: (-rewards[i], i))[:high]
    taken = set(best)
    worst = [i for i in sorted(range(m), key=lambda i: (rewards[i], i)) if i not in taken][: t - high]
    return sorted(best + worst)


_FIELDS = ("input_ids", "attention_mask", "completion_mask", "rewards")


class KeptRows:
    """Each rolled-out task's scored completion rows (on CPU), by task id."""

    def __init__(self, pad: int) -> None:
        self.pad = pad
        self.rows: dict[int, Rollouts] = {}

    def add(self, ro: PlannedRollouts) -> None:
        """A generation call's scored rollouts, appended to each task's rows."""
        cpu = torch.device("cpu")
        for part in ro.parts:
            if part.rewards is None:
                raise InvalidArgumentError("rewards: kept rows must be scored", "rewards")
            local = part.to(cpu)
            for pos, tid in enumerate(int(t) for t in part.task_ids.tolist()):
                chunk = local.take([pos])
                old = self.rows.get(tid)
                self.rows[tid] = chunk if old is None else merge_task_rows([old, chunk], self.pad)

    def group(self, task_id: int, successes: float, trials: float) -> Rollouts:
        """The group task ``task_id`` is trained on (:func:`trained_rows` of its kept rows)."""
        kept = self.rows.get(int(task_id))
        if kept is None:
            raise InvalidArgumentError(f"task_ids: task {int(task_id)} has no kept completions to train on", "task_ids")
        assert kept.rewards is not None
        rows = trained_rows(kept.rewards[0].tolist(), successes, int(round(float(trials))))
        return kept if len(rows) == kept.n else kept.rows(rows)

    def keep_only(self, task_ids: Iterable[int]) -> None:
        """Drop every task's rows but those of ``task_ids``."""
        keep = {int(t) for t in task_ids}
        self.rows = {tid: ro for tid, ro in self.rows.items() if tid in keep}

    def state(self) -> dict[str, Any]:
        """The rows as a tree of tensors and plain values (:func:`.run_checkpoint.save_tree`)."""
        return {
            "pad": self.pad,
            "tasks": [
                {
                    "task_id": tid,
                    "n": ro.n,
                    "prompt_len": ro.prompt_len,
                    "texts": list(ro.texts),
                    **{name: getattr(ro, name) for name in _FIELDS},
                }
                for tid, ro in sorted(self.rows.items())
            ],
        }

    def load_state(self, state: Any, where: str) -> None:
        """The rows :meth:`state` saved (a malformed entry is a CheckpointError naming ``where``)."""
        rows: dict[int, Rollouts] = {}
        try:
            for entry in state["tasks"]:
                tid, n, plen = int(entry["task_id"]), int(entry["n"]), int(entry["prompt_len"])
                tensors = {name: entry[name] for name in _FIELDS}
                texts = [str(t) for t in entry["texts"]]
                if not all(isinstance(t, torch.Tensor) for t in tensors.values()):
                    raise TypeError("a row field is not a tensor")
                ids, rewards = tensors["input_ids"], tensors["rewards"]
                if ids.shape[0] != n or len(texts) != n or tuple(rewards.shape) != (1, n) or plen > ids.shape[1]:
                    raise ValueError(f"task {tid}'s rows do not have {n} entries")
                rows[tid] = Rollouts(
                    task_ids=torch.tensor([tid], dtype=torch.long),
                    n=n,
                    input_ids=ids,
                    attention_mask=tensors["attention_mask"],
                    prompt_len=plen,
                    completion_mask=tensors["completion_mask"],
                    texts=texts,
                    rewards=rewards,
                )
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"checkpoint {where!r}: has malformed queued completions ({exc})") from None
        self.rows = rows
