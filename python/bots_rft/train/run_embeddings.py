"""The task embeddings a training run's method reads (``embeddings:``; bots-embed, bots-sim).

``embeddings: policy`` computes them from the starting policy once, at the start of a fresh run
(after the supervised warm-up, if any): each training prompt, rendered as rollouts render it, one
prefill, the last hidden state mean-pooled over the prompt. They are written to the run's
directory (``embeddings.safetensors``), so a resumed run reads the starting policy's embeddings
rather than those of the policy it has become. Any other value is a file ``bots embed`` wrote,
read by task id in the pool's row order.

Their cost is one forward pass over every prompt token of the pool, recorded as
``prompt_tokens`` (the compute axis; rollouts stay the rollout axis), with the seconds it took.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ..data import TaskPool
from ..data.embeddings import embeddings_for, read_embeddings, write_embeddings
from ..errors import BotsError, CheckpointError, ConfigError

__all__ = ["RUN_FILE", "EmbeddingsInfo", "from_file", "from_policy", "from_run"]

#: Where a run keeps the embeddings it computed from its starting policy.
RUN_FILE = "embeddings.safetensors"


@dataclass(frozen=True)
class EmbeddingsInfo:
    """Where a run's embeddings came from and what they cost."""

    source: str  # "policy" or the file's path
    tasks: int
    dim: int
    prompt_tokens: int  # tokens prefilled to compute them (0: read from a file)
    seconds: float

    def record(self) -> dict[str, Any]:
        return asdict(self)


def from_file(path: str, pool: TaskPool) -> tuple[npt.NDArray[np.float32], EmbeddingsInfo]:
    """The pool's rows of a ``bots embed`` file; a missing task or a bad file is the config's
    error naming ``embeddings``."""
    start = time.perf_counter()
    try:
        matrix = embeddings_for(path, pool.ids, argument="embeddings")
    except BotsError as exc:  # a missing or bad file is a DataError too, naming the key
        message = str(exc)
        raise ConfigError(message if message.startswith("embeddings") else f"embeddings: {message}") from None
    info = EmbeddingsInfo(str(path), int(matrix.shape[0]), int(matrix.shape[1]), 0, time.perf_counter() - start)
    return matrix, info


def from_policy(
    model: Any, tokenizer: Any, pool: TaskPool, chats: Any, out_dir: Path, *, batch_size: int, max_prompt_tokens: Any
) -> tuple[npt.NDArray[np.float32], EmbeddingsInfo]:
    """The starting policy's embeddings of every training prompt, written to the run's directory."""
    from .embed import prompt_embeddings

    start = time.perf_counter()
    matrix, tokens = prompt_embeddings(
        model, tokenizer, chats, batch_size=batch_size, max_prompt_tokens=max_prompt_tokens
    )
    seconds = time.perf_counter() - start
    info = EmbeddingsInfo("policy", int(matrix.shape[0]), int(matrix.shape[1]), int(tokens), seconds)
    write_embeddings(
        out_dir / RUN_FILE,
        pool.ids,
        matrix,
        metadata={"model": "the run's starting policy", "prompt_tokens": str(tokens), "seconds": f"{seconds:.3f}"},
    )
    return matrix, info


def from_run(out_dir: Path, pool: TaskPool) -> tuple[npt.NDArray[np.float32], EmbeddingsInfo]:
    """The starting policy's embeddings a run computed, for its resumption."""
    path = out_dir / RUN_FILE
    if not path.exists():
        raise CheckpointError(
            f"embeddings: the run in {str(out_dir)!r} has no {RUN_FILE} (its starting policy's embeddings); "
            "resume it with the embeddings: it started with"
        )
    start = time.perf_counter()
    stored = read_embeddings(path)
    matrix = embeddings_for(stored, pool.ids, argument="embeddings")
    tokens = int(stored.metadata.get("prompt_tokens", "0"))
    return matrix, EmbeddingsInfo(
        "policy", int(matrix.shape[0]), int(matrix.shape[1]), tokens, time.perf_counter() - start
    )
