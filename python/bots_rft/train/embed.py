"""Task embeddings from a causal LM (``bots embed``): each task's prompt, rendered as training
renders it (the pool's chat, ``system_prompt`` applied, the chat template, left-truncated to
``max_prompt_tokens``), run through the model once; the embedding is the mean of the last hidden
state over the prompt's tokens, in float32. One prefill per task: the cost is the prompt tokens.

Work is done in fixed chunks of tasks; each chunk's embeddings go to their own file in the progress
folder ``<out>.progress/`` (written to a temporary file, fsynced, renamed), beside ``config.json``
with what must match for a rerun to resume (model, adapter, pool identity, prompt settings, batch
size, chunk size, dtype, seed). An interrupted run resumes where it stopped and writes what an
uninterrupted one would, bit for bit, on the same device; ``restart`` discards the progress. The
embeddings file (:mod:`bots_rft.data.embeddings`) is written at the end and the progress removed.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ..data.embeddings import _atomic_save, pca_reduce, write_embeddings
from ..data.pool import Message, TaskPool
from ..errors import ConfigError, InvalidArgumentError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "EmbedConfig",
    "EmbedSummary",
    "prompt_embeddings",
    "run_embed",
    "progress_dir_for",
    "POOLING",
]

#: How a prompt's vector is made (recorded in the file's metadata).
POOLING = "mean of the last hidden state over the prompt tokens"
_PROGRESS_FORMAT = "bots-embed-progress"
_CONFIG = "config.json"
_CHUNK = re.compile(r"^chunk-(\d+)\.safetensors$")


def _prompt_size(chat: Sequence[Message]) -> int:
    return sum(len(m.get("content") or "") for m in chat)


def _decoder(model: Any) -> Any | None:
    """The model's decoder stack (``model.model`` for the usual causal LMs), whose
    ``last_hidden_state`` is the causal LM's last hidden state without computing any logits; None
    when the model has none apart from itself."""
    get = getattr(model, "get_decoder", None)
    if get is None:
        return None
    try:
        decoder = get()
    except (AttributeError, NotImplementedError, TypeError):
        return None
    if decoder is None or decoder is model or not callable(decoder):
        return None
    return decoder


def last_hidden_state(model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """``[B, T, d]``: the causal LM's last hidden state (``output_hidden_states=True``'s last
    entry, the final norm applied) for left-padded ``input_ids``, with position ids that skip the
    padding (as generation and the trainer's forward passes count them), so that a prompt's states
    do not depend on how much padding its batch gave it."""
    from .policy import position_ids

    pos = position_ids(attention_mask)
    decoder = _decoder(model)
    if decoder is not None:
        out = decoder(input_ids=input_ids, attention_mask=attention_mask, position_ids=pos, use_cache=False)
        hidden: torch.Tensor = out.last_hidden_state
        return hidden
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=pos,
        use_cache=False,
        output_hidden_states=True,
    )
    last: torch.Tensor = out.hidden_states[-1]
    return last


def prompt_embeddings(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    chats: Sequence[Sequence[Message]],
    *,
    batch_size: int = 64,
    max_prompt_tokens: int | None = None,
    device: torch.device | str | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> tuple[npt.NDArray[np.float32], int]:
    """float32 ``[len(chats), d]``: each chat's prompt (chat template, left padding and
    left truncation to ``max_prompt_tokens`` as the rollouts encode it:
    :func:`bots_rft.llm.models.encode_chats`) through ``model``, its last hidden state averaged
    over the prompt's tokens (the attention mask), in float32 (float64 for a float64 model, then
    rounded). Also the number of prompt tokens processed (the attention masks' sum): the compute
    this cost. Batches of ``batch_size`` chats, grouped by length (fewer pad tokens) and returned
    in the given order; a chat's row does not depend on its batch beyond float rounding. Runs
    under ``torch.inference_mode`` with the model in eval mode, whose previous mode is restored.
    ``on_batch(n)`` is called after each batch of ``n`` chats."""
    import torch

    from ..llm.models import compute_float, encode_chats

    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgumentError(f"batch_size: must be an integer >= 1, got {batch_size!r}", "batch_size")
    if max_prompt_tokens is not None and (
        isinstance(max_prompt_tokens, bool) or not isinstance(max_prompt_tokens, int) or max_prompt_tokens < 1
    ):
        raise InvalidArgumentError(
            f"max_prompt_tokens: must be an integer >= 1 or None, got {max_prompt_tokens!r}", "max_prompt_tokens"
        )
    dev = torch.device(device) if device is not None else next(model.parameters()).device
    n = len(chats)
    if n == 0:
        hidden = getattr(model.config, "hidden_size", 0)
        return np.zeros((0, int(hidden or 0)), dtype=np.float32), 0
    order = sorted(range(n), key=lambda i: (_prompt_size(chats[i]), i))
    out: npt.NDArray[np.float32] | None = None
    tokens = 0
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            for start in range(0, n, batch_size):
                members = order[start : start + batch_size]
                enc = encode_chats(tokenizer, [chats[i] for i in members], dev, max_prompt_tokens)
                mask = enc["attention_mask"]
                states = compute_float(last_hidden_state(model, enc["input_ids"], mask))
                keep = mask.bool().unsqueeze(-1)
                # torch.where, not a product: a padded position's state may be anything (even NaN).
                summed = torch.where(keep, states, torch.zeros((), dtype=states.dtype, device=states.device)).sum(1)
                counts = mask.sum(1, keepdim=True).clamp(min=1).to(states.dtype)
                pooled = (summed / counts).float().cpu().numpy()
                if out is None:
                    out = np.empty((n, pooled.shape[1]), dtype=np.float32)
                out[members] = pooled
                tokens += int(mask.sum().item())
                if on_batch is not None:
                    on_batch(len(members))
    finally:
        model.train(was_training)
    assert out is not None
    return out, tokens


@dataclass
class EmbedConfig:
    model: str
    pool: str
    out: str
    # A LoRA adapter merged into ``model`` (as bots refeval's --adapter; run_checkpoint.resolve_adapter).
    adapter: str | None = None
    batch_size: int = 64  # prompts per forward pass
    max_prompt_tokens: int | None = 1024  # the trainer's default: longer prompts keep their end
    system_prompt: str | None = None  # None: the pool's; "": none; else replaces it (as in training)
    dim: int | None = None  # PCA to this many dimensions; None: the model's hidden size
    chunk_tasks: int | None = None  # tasks per progress file; default 16 * batch_size
    limit: int | None = None  # only the first ``limit`` rows
    seed: int = 0  # the tiny random model's weights
    device: str | None = None
    dtype: str | None = None
    restart: bool = False  # discard (and replace) existing progress
    keep_progress: bool = False

    def validate(self) -> None:
        def bad(name: str, why: str) -> InvalidArgumentError:
            return InvalidArgumentError(f"{name}: {why}, got {getattr(self, name)!r}", name)

        for name in ("batch_size", "max_prompt_tokens", "dim", "chunk_tasks", "limit"):
            value = getattr(self, name)
            if value is None and name != "batch_size":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise bad(name, "must be an integer >= 1")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise bad("seed", "must be an integer >= 0")
        if not self.out:
            raise bad("out", "needs a file name")

    def chunk_size(self) -> int:
        return self.chunk_tasks or 16 * self.batch_size


@dataclass
class EmbedSummary:
    out: str
    tasks: int
    embedded_now: int
    resumed: int
    dim: int
    model_dim: int
    prompt_tokens: int  # over every task written (resumed chunks included)
    prompt_tokens_now: int  # processed by this run
    seconds: float
    embed_seconds: float = 0.0  # the chunk loop: tasks/s and tokens/s are over it
    load_seconds: float = 0.0
    explained_variance: float | None = None  # the PCA's share of the variance kept

    @property
    def tasks_per_s(self) -> float:
        return self.embedded_now / max(self.embed_seconds, 1e-9)

    @property
    def tokens_per_s(self) -> float:
        return self.prompt_tokens_now / max(self.embed_seconds, 1e-9)

    def line(self) -> str:
        pca = (
            f" (PCA of {self.model_dim}, {100 * self.explained_variance:.1f}% of the variance)"
            if self.explained_variance is not None
            else ""
        )
        return (
            f"embedded {self.tasks} tasks (now {self.embedded_now}, resumed {self.resumed}), dim {self.dim}{pca}, "
            f"{self.prompt_tokens} prompt tokens; {self.seconds:.1f}s ({self.embed_seconds:.1f}s embedding: "
            f"{self.tasks_per_s:.1f} tasks/s, {self.tokens_per_s:.0f} tokens/s; model load {self.load_seconds:.1f}s); "
            f"wrote {self.out}"
        )


def progress_dir_for(out: str | os.PathLike[str]) -> Path:
    out_path = Path(out)
    return out_path.with_name(f"{out_path.name}.progress")


def _chunk_path(directory: Path, chunk: int) -> Path:
    return directory / f"chunk-{chunk:07d}.safetensors"


def _clear_progress(directory: Path) -> None:
    """Remove what this module writes into ``directory`` (and the folder, when that empties it)."""
    if not directory.is_dir():
        return
    for p in directory.iterdir():
        if p.name == _CONFIG or _CHUNK.match(p.name) or (p.name.startswith(".") and p.name.endswith(".tmp")):
            p.unlink(missing_ok=True)
    try:
        directory.rmdir()
    except OSError:
        pass  # something else is in it: left alone


def _read_config(path: Path) -> dict[str, Any]:
    try:
        header = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(header, dict) or header.get("format") != _PROGRESS_FORMAT:
            raise ValueError("not a progress header")
    except (OSError, ValueError) as exc:
        raise ConfigError(f"progress {str(path)!r} has a corrupt header ({exc}); rerun with --restart") from None
    return header


def _read_chunk(path: Path, rows: list[int]) -> tuple[npt.NDArray[np.float32], int] | None:
    """A finished chunk's embeddings and prompt tokens, or None when its file is missing or not
    what this chunk wrote (it is then embedded again)."""
    if not path.is_file():
        return None
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="np") as f:
            got_rows = f.get_tensor("rows")
            emb = f.get_tensor("embeddings")
            tokens = int((f.metadata() or {})["prompt_tokens"])
    except Exception:  # noqa: BLE001 - a damaged chunk is embedded again
        return None
    if (
        got_rows.dtype != np.int64
        or got_rows.tolist() != rows
        or emb.dtype != np.float32
        or emb.ndim != 2
        or emb.shape[0] != len(rows)
        or not np.isfinite(emb).all()
    ):
        return None
    return emb, tokens


def run_embed(cfg: EmbedConfig, progress: bool = True) -> EmbedSummary:
    """Embed every task of ``cfg.pool`` (its first ``cfg.limit``) with ``cfg.model`` and write
    :mod:`bots_rft.data.embeddings`'s file to ``cfg.out``; resumable (see the module docstring)."""
    from .._progress import progress_bar
    from ..llm.models import load_model, resolve_device, resolve_dtype
    from .run_checkpoint import resolve_adapter

    # Everything that can be wrong with the request is found before the progress is written: a
    # failed start must not leave a header whose fingerprint blocks the corrected rerun.
    cfg.validate()
    started = time.monotonic()
    adapter = resolve_adapter(cfg.adapter) if cfg.adapter is not None else None
    dtype_name = str(resolve_dtype(cfg.dtype, resolve_device(cfg.device))).removeprefix("torch.")
    pool = TaskPool.load(cfg.pool)
    n_target = min(len(pool), cfg.limit) if cfg.limit else len(pool)
    if cfg.dim is not None and cfg.dim > n_target:
        raise InvalidArgumentError(
            f"dim: --dim {cfg.dim} is more than the {n_target} tasks embedded; PCA needs at least as many tasks", "dim"
        )
    chunk_tasks = cfg.chunk_size()
    chunks = [list(range(s, min(s + chunk_tasks, n_target))) for s in range(0, n_target, chunk_tasks)]
    identity = pool.identity()
    fingerprint: dict[str, Any] = {
        "model": cfg.model,
        "adapter": None if adapter is None else str(adapter),
        "pool": identity,
        "rows": n_target,
        "system_prompt": cfg.system_prompt,
        "max_prompt_tokens": cfg.max_prompt_tokens,
        "batch_size": cfg.batch_size,
        "chunk_tasks": chunk_tasks,
        "seed": cfg.seed,
        "dtype": dtype_name,
        "pooling": POOLING,
    }

    pdir = progress_dir_for(cfg.out)
    fresh = cfg.restart or not (pdir / _CONFIG).is_file()
    done: dict[int, tuple[npt.NDArray[np.float32], int]] = {}
    if not fresh:
        header = _read_config(pdir / _CONFIG)
        if header.get("config") != fingerprint:
            raise ConfigError(
                f"progress {str(pdir)!r} was written with different settings ({header.get('config')}) than now "
                f"({fingerprint}); rerun with the same settings to resume, or with --restart to start over"
            )
        for c, rows in enumerate(chunks):
            chunk = _read_chunk(_chunk_path(pdir, c), rows)
            if chunk is not None:
                done[c] = chunk
    todo = [(c, rows) for c, rows in enumerate(chunks) if c not in done]
    resumed = sum(len(chunks[c]) for c in done)

    t_load = time.monotonic()
    loaded = load_model(cfg.model, device=cfg.device, dtype=cfg.dtype, seed=cfg.seed, adapter=adapter) if todo else None
    load_seconds = time.monotonic() - t_load
    model_dim = None
    if loaded is not None:
        model_dim = getattr(loaded[0].config, "hidden_size", None)
    elif done:
        model_dim = next(iter(done.values()))[0].shape[1]
    if cfg.dim is not None and model_dim is not None and cfg.dim > int(model_dim):
        raise InvalidArgumentError(
            f"dim: --dim {cfg.dim} is more than the model's hidden size {int(model_dim)}; choose at most that", "dim"
        )
    if fresh:
        _clear_progress(pdir)
        pdir.mkdir(parents=True, exist_ok=True)
        header_bytes = json.dumps({"format": _PROGRESS_FORMAT, "config": fingerprint, "pool_path": str(cfg.pool)})
        tmp = pdir / f".{_CONFIG}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(header_bytes + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, pdir / _CONFIG)
    else:
        for p in pdir.iterdir():  # a write cut off by the interruption
            if p.name.startswith(".") and p.name.endswith(".tmp"):
                p.unlink(missing_ok=True)

    tokens_now = 0
    t_embed = time.monotonic()
    if loaded is not None:
        model, tokenizer = loaded
        bar = progress_bar(
            total=n_target,
            initial=n_target - sum(len(r) for _, r in todo),
            desc="embed",
            unit="task",
            disable=not progress,
        )
        try:
            for c, rows in todo:
                emb, n_tok = prompt_embeddings(
                    model,
                    tokenizer,
                    pool.prompts(rows, system_prompt=cfg.system_prompt),
                    batch_size=cfg.batch_size,
                    max_prompt_tokens=cfg.max_prompt_tokens,
                    on_batch=bar.update,
                )
                _atomic_save(
                    _chunk_path(pdir, c),
                    {"rows": np.asarray(rows, dtype=np.int64), "embeddings": emb},
                    {"prompt_tokens": str(n_tok), "chunk": str(c)},
                )
                done[c] = (emb, n_tok)
                tokens_now += n_tok
                elapsed = max(time.monotonic() - t_embed, 1e-9)
                bar.set_postfix_str(f"{tokens_now / elapsed:.0f} tokens/s")
        finally:
            bar.close()
    embed_seconds = time.monotonic() - t_embed

    matrix = np.concatenate([done[c][0] for c in range(len(chunks))], axis=0)
    prompt_tokens = sum(done[c][1] for c in range(len(chunks)))
    source_dim = int(matrix.shape[1])
    if cfg.dim is not None and cfg.dim > source_dim:  # resumed without loading the model
        raise InvalidArgumentError(
            f"dim: --dim {cfg.dim} is more than the model's hidden size {source_dim}; choose at most that", "dim"
        )
    metadata = {
        "model": cfg.model,
        "pool": str(cfg.pool),
        "pool_identity": json.dumps(identity, sort_keys=True),
        "rows": str(n_target),
        "model_dim": str(source_dim),
        "prompt_tokens": str(prompt_tokens),
        "max_prompt_tokens": "none" if cfg.max_prompt_tokens is None else str(cfg.max_prompt_tokens),
        "pooling": POOLING,
        "dtype": dtype_name,
        "seed": str(cfg.seed),
    }
    if adapter is not None:
        metadata["adapter"] = str(adapter)
    if cfg.system_prompt is not None:
        metadata["system_prompt"] = cfg.system_prompt
    explained = None
    if cfg.dim is not None:
        matrix, explained = pca_reduce(matrix, cfg.dim)
        metadata["pca_dim"] = str(cfg.dim)
        metadata["pca_explained_variance"] = repr(explained)
    write_embeddings(cfg.out, pool.ids[:n_target], matrix, metadata=metadata)
    if not cfg.keep_progress:
        _clear_progress(pdir)
    return EmbedSummary(
        out=str(cfg.out),
        tasks=n_target,
        embedded_now=n_target - resumed,
        resumed=resumed,
        dim=int(matrix.shape[1]),
        model_dim=source_dim,
        prompt_tokens=prompt_tokens,
        prompt_tokens_now=tokens_now,
        seconds=time.monotonic() - started,
        embed_seconds=embed_seconds,
        load_seconds=load_seconds,
        explained_variance=explained,
    )
