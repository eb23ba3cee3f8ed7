"""Rollouts: n sampled completions per task, kept as token tensors for the loss, decoded for the
verifiers. Three engines sample them from the same distribution: ``"hf"``, Hugging Face
``generate`` over ``tasks * n`` left-padded rows per generation batch; ``"fast"``
(:func:`bots_rft.llm.generation.sample_completions`: each prompt encoded once and its KV cache
shared by its n rows, finished rows leaving the batch); and ``"speculative"``
(:func:`bots_rft.llm.speculative.sample_completions_speculative`: the fast engine's layout, with a
bfloat16 draft of the model proposing tokens that the model accepts or replaces). Whichever
engine, the rollouts are laid out the same (prompts left padded, completions right padded), so
the loss recomputes exact log-probs from the torch policy."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..data.pool import Message
from ..errors import ConfigError
from ..llm.generation import sample_completions
from ..llm.models import encode_chats
from ..llm.speculative import bf16_draft, sample_completions_speculative
from .config import ROLLOUT_ENGINES
from .distributed import Dist
from .policy import autocast, eval_mode, unwrap

__all__ = [
    "Rollouts",
    "PlannedRollouts",
    "generate_rollouts",
    "generate_planned_rollouts",
    "completion_mask",
    "concat_rollouts",
    "merge_task_rows",
]


@dataclass
class Rollouts:
    """``S = tasks * n`` sequences, grouped task-major (rows ``i*n .. i*n+n-1`` are task i's)."""

    task_ids: torch.Tensor  # [tasks] int64 (selector ids)
    n: int
    input_ids: torch.Tensor  # [S, P + T] prompt (left padded) + completion (padded after EOS)
    attention_mask: torch.Tensor  # [S, P + T]
    prompt_len: int  # P
    completion_mask: torch.Tensor  # [S, T] 1 on generated tokens up to and including EOS
    texts: list[str]  # decoded completions, S entries
    rewards: torch.Tensor | None = None  # [tasks, n]

    @property
    def num_tasks(self) -> int:
        return int(self.task_ids.numel())

    def take(self, tasks: Sequence[int]) -> Rollouts:
        """The rollouts of the given task positions (same padding), rewards included."""
        idx = torch.tensor([i * self.n + j for i in tasks for j in range(self.n)], dtype=torch.long)
        dev = self.input_ids.device
        return Rollouts(
            task_ids=self.task_ids[list(tasks)],
            n=self.n,
            input_ids=self.input_ids[idx.to(dev)],
            attention_mask=self.attention_mask[idx.to(dev)],
            prompt_len=self.prompt_len,
            completion_mask=self.completion_mask[idx.to(dev)],
            texts=[self.texts[int(i)] for i in idx],
            rewards=None if self.rewards is None else self.rewards[list(tasks)],
        )

    def rows(self, rows: Sequence[int]) -> Rollouts:
        """One task's given rows (a single-task :class:`Rollouts`, same padding, ``n = len(rows)``),
        rewards included."""
        if self.num_tasks != 1:
            raise ValueError(f"rows: takes rows of a single-task Rollouts, this one has {self.num_tasks} tasks")
        idx = torch.tensor(list(rows), dtype=torch.long)
        dev = self.input_ids.device
        return Rollouts(
            task_ids=self.task_ids,
            n=len(idx),
            input_ids=self.input_ids[idx.to(dev)],
            attention_mask=self.attention_mask[idx.to(dev)],
            prompt_len=self.prompt_len,
            completion_mask=self.completion_mask[idx.to(dev)],
            texts=[self.texts[int(i)] for i in idx],
            rewards=None if self.rewards is None else self.rewards[:, idx],
        )

    def to(self, device: torch.device) -> Rollouts:
        return Rollouts(
            self.task_ids,
            self.n,
            self.input_ids.to(device),
            self.attention_mask.to(device),
            self.prompt_len,
            self.completion_mask.to(device),
            self.texts,
            self.rewards,
        )


@dataclass
class PlannedRollouts:
    """Rollouts of tasks that each have their own count (a plan: :meth:`bots_rft.BOTS.plan`).

    Tasks with equal counts share one :class:`Rollouts` (``parts``, one per distinct count, fixed n
    each), so generation, scoring and GRPO's groups work as for any batch; ``order[i]`` is
    ``(part, position)``: where the batch's i-th task lies."""

    parts: list[Rollouts]
    order: list[tuple[int, int]]

    @property
    def num_tasks(self) -> int:
        return len(self.order)

    @property
    def task_ids(self) -> list[int]:
        return [int(self.parts[p].task_ids[i]) for p, i in self.order]

    @property
    def counts(self) -> list[int]:
        """Each task's rollouts, in the batch's order."""
        return [self.parts[p].n for p, _ in self.order]

    def task_rewards(self) -> list[list[float]]:
        """Each task's rewards (``counts[i]`` of them), in the batch's order; needs scored parts."""
        rows = [p.rewards.tolist() if p.rewards is not None else None for p in self.parts]
        if any(r is None for r in rows):
            raise ValueError("rewards: the planned rollouts are not scored yet")
        return [rows[p][i] for p, i in self.order]  # type: ignore[index]

    def task_lengths(self) -> list[list[int]]:
        """Each task's completion lengths in tokens, in the batch's order."""
        lengths = [p.completion_mask.sum(1).tolist() for p in self.parts]
        return [lengths[p][i * self.parts[p].n : (i + 1) * self.parts[p].n] for p, i in self.order]


def generate_planned_rollouts(
    model: Any,
    tokenizer: Any,
    chats: Sequence[Sequence[Message]],
    task_ids: Sequence[int],
    counts: Sequence[int],
    **kwargs: Any,
) -> PlannedRollouts:
    """``counts[i]`` completions of ``chats[i]``: one :func:`generate_rollouts` call (same
    ``kwargs``, either engine) per distinct count, smallest count first, tasks in the given order
    within it. Deterministic given torch's global RNG, as :func:`generate_rollouts` is."""
    if len(chats) != len(task_ids) or len(counts) != len(task_ids):
        raise ValueError(
            f"counts: expected one count and one chat per task ({len(task_ids)}), got {len(counts)} and {len(chats)}"
        )
    parts: list[Rollouts] = []
    order: list[tuple[int, int]] = [(0, 0)] * len(task_ids)
    for count in sorted(set(int(c) for c in counts)):
        members = [i for i, c in enumerate(counts) if int(c) == count]
        for position, i in enumerate(members):
            order[i] = (len(parts), position)
        parts.append(
            generate_rollouts(
                model, tokenizer, [chats[i] for i in members], [task_ids[i] for i in members], count, **kwargs
            )
        )
    return PlannedRollouts(parts, order)


def completion_mask(completion: torch.Tensor, eos_ids: Sequence[int]) -> torch.Tensor:
    """1 on each token up to and including the first EOS (everything when none), else 0.
    Works when the pad token equals EOS, where ``!= pad`` would drop the EOS token itself."""
    is_eos = torch.zeros_like(completion, dtype=torch.bool)
    for e in eos_ids:
        is_eos |= completion == e
    # Tokens strictly after the first EOS have a cumulative EOS count >= 1 before them.
    before = torch.cumsum(is_eos.long(), dim=-1) - is_eos.long()
    return (before == 0).long()


def _eos_ids(model: Any) -> list[int]:
    eos = unwrap(model).generation_config.eos_token_id
    if eos is None:
        return []
    return [int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])]


def _pad_cat(parts: list[torch.Tensor], left: bool, value: int) -> torch.Tensor:
    width = max(p.shape[1] for p in parts)
    out = []
    for p in parts:
        pad = width - p.shape[1]
        if pad:
            fill = torch.full((p.shape[0], pad), value, dtype=p.dtype, device=p.device)
            p = torch.cat([fill, p] if left else [p, fill], dim=1)
        out.append(p)
    return torch.cat(out, dim=0)


def generate_rollouts(
    model: Any,
    tokenizer: Any,
    chats: Sequence[Sequence[Message]],
    task_ids: Sequence[int],
    n: int,
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    batch_size: int = 64,
    max_prompt_tokens: int | None = None,
    greedy: bool = False,
    bf16: bool = True,
    synced_gpus: bool = False,
    engine: str = "fast",
    sampler: Any = None,
) -> Rollouts:
    """``n`` completions for each chat; torch's global RNG drives the sampling (seed it for
    reproducible rollouts). ``greedy`` decodes deterministically (evaluation). ``engine`` is one
    of :data:`ROLLOUT_ENGINES`; ``batch_size`` bounds the sequences decoded together (the fast
    engine rolls out ``batch_size // n`` tasks at a time, at least one). ``sampler``: the module
    that samples when not ``model`` itself (an int8 twin, :mod:`.sampling_copy`)."""
    if engine not in ROLLOUT_ENGINES:
        raise ConfigError(f"rollout_engine: expected one of {list(ROLLOUT_ENGINES)}, got {engine!r}")
    if engine == "speculative" and sampler is not None:
        raise ConfigError(
            "rollout_engine: 'speculative' verifies every token with the policy itself, so it cannot sample with "
            "rollout_precision: 'int8''s twin; choose one"
        )
    sharded = Dist.is_fsdp(model)
    if engine == "speculative" and sharded:
        raise ConfigError(
            "rollout_engine: 'speculative' keeps a bfloat16 copy of the whole model, which FSDP's sharding is "
            "there to avoid; use 'fast' with distributed: fsdp"
        )
    net = unwrap(model)
    device = next(net.parameters()).device
    draw = net if sampler is None else sampler
    pad = int(tokenizer.pad_token_id)
    eos = _eos_ids(model)
    prompts: list[torch.Tensor] = []
    prompt_masks: list[torch.Tensor] = []
    completions: list[torch.Tensor] = []
    sample_kw: dict[str, Any] = (
        {"do_sample": False} if greedy else {"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": 0}
    )
    with eval_mode(net), torch.inference_mode(), autocast(device, bf16):
        if engine in ("fast", "speculative"):
            draft = bf16_draft(net) if engine == "speculative" else None
            per_call = max(1, batch_size // n)
            kw: dict[str, Any] = {
                "max_new_tokens": max_new_tokens,
                "eos_ids": eos,
                "pad_id": pad,
                "greedy": greedy,
                "temperature": temperature,
                "top_p": top_p,
            }
            for start in range(0, len(chats), per_call):
                enc = encode_chats(tokenizer, chats[start : start + per_call], device, max_prompt_tokens)
                ids, mask = enc["input_ids"], enc["attention_mask"]
                unpadded = [row[m.bool()].tolist() for row, m in zip(ids, mask)]
                completions.append(
                    sample_completions(draw, unpadded, n, copy_weights=not sharded, **kw)
                    if draft is None
                    else sample_completions_speculative(draw, draft, unpadded, n, **kw)
                )
                prompts.append(ids.repeat_interleave(n, dim=0))
                prompt_masks.append(mask.repeat_interleave(n, dim=0))
        else:
            flat = [i for i in range(len(chats)) for _ in range(n)]
            for start in range(0, len(flat), batch_size):
                idx = flat[start : start + batch_size]
                enc = encode_chats(tokenizer, [chats[i] for i in idx], device, max_prompt_tokens)
                seqs = draw.generate(
                    **enc,
                    max_new_tokens=max_new_tokens,
                    eos_token_id=eos or None,
                    pad_token_id=pad,
                    use_cache=True,
                    synced_gpus=synced_gpus,
                    **sample_kw,
                )
                plen = enc["input_ids"].shape[1]
                prompts.append(enc["input_ids"])
                prompt_masks.append(enc["attention_mask"])
                completions.append(seqs[:, plen:])
    prompt_ids = _pad_cat(prompts, left=True, value=pad)
    prompt_mask = _pad_cat(prompt_masks, left=True, value=0)
    completion = _pad_cat(completions, left=False, value=pad)
    cmask = completion_mask(completion, eos)
    completion = torch.where(cmask.bool(), completion, torch.full_like(completion, pad))
    texts = tokenizer.batch_decode(completion * cmask + pad * (1 - cmask), skip_special_tokens=True)
    return Rollouts(
        task_ids=torch.as_tensor(list(task_ids), dtype=torch.long),
        n=n,
        input_ids=torch.cat([prompt_ids, completion], dim=1).clone(),
        attention_mask=torch.cat([prompt_mask, cmask], dim=1).clone(),
        prompt_len=int(prompt_ids.shape[1]),
        completion_mask=cmask.clone(),
        texts=list(texts),
    )


def _stack_rows(parts: Sequence[Rollouts], pad: int) -> dict[str, Any]:
    """The rows of several :class:`Rollouts` (different generate calls pad differently) as one
    padded layout: prompts re-padded on the left, completions on the right."""
    prompts = _pad_cat([p.input_ids[:, : p.prompt_len] for p in parts], left=True, value=pad)
    pmask = _pad_cat([p.attention_mask[:, : p.prompt_len] for p in parts], left=True, value=0)
    comps = _pad_cat([p.input_ids[:, p.prompt_len :] for p in parts], left=False, value=pad)
    cmask = _pad_cat([p.completion_mask for p in parts], left=False, value=0)
    return {
        "input_ids": torch.cat([prompts, comps], dim=1),
        "attention_mask": torch.cat([pmask, cmask], dim=1),
        "prompt_len": int(prompts.shape[1]),
        "completion_mask": cmask,
        "texts": [t for p in parts for t in p.texts],
    }


def concat_rollouts(parts: Sequence[Rollouts], pad: int) -> Rollouts:
    """One :class:`Rollouts` from the tasks of several (all with the same n; different generate
    calls pad differently). All on CPU or all on one device."""
    if len(parts) == 1:
        return parts[0]
    rewards = [p.rewards for p in parts]
    return Rollouts(
        task_ids=torch.cat([p.task_ids for p in parts]),
        n=parts[0].n,
        rewards=None if any(r is None for r in rewards) else torch.cat(rewards),  # type: ignore[arg-type]
        **_stack_rows(parts, pad),
    )


def merge_task_rows(chunks: Sequence[Rollouts], pad: int) -> Rollouts:
    """One task's rows from several generation calls as one single-task :class:`Rollouts`
    (``n`` = the rows of all chunks, in the given order): prompts re-padded on the left,
    completions on the right, rewards concatenated. Each chunk holds that one task's rows."""
    if not chunks:
        raise ValueError("chunks: expected at least one")
    tids = {int(c.task_ids[0]) for c in chunks if c.num_tasks == 1}
    if len(tids) != 1 or any(c.num_tasks != 1 for c in chunks):
        raise ValueError("chunks: expected single-task Rollouts of one task")
    if len(chunks) == 1:
        return chunks[0]
    rewards = [c.rewards for c in chunks]
    return Rollouts(
        task_ids=chunks[0].task_ids,
        n=sum(c.n for c in chunks),
        rewards=None if any(r is None for r in rewards) else torch.cat(rewards, dim=1),  # type: ignore[arg-type]
        **_stack_rows(chunks, pad),
    )
