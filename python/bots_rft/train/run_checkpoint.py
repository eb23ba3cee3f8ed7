"""Trainer checkpoints: a directory per step with the model, optimizer, scheduler, selector (in
its own format), every rank's RNG states, the step and the pool's identity; written into a
temporary directory and renamed into place, with a ``latest`` pointer written atomically, so a
kill mid-save never leaves a checkpoint that looks complete but is not.

The policy's part is its trainable weights only: everything for full fine-tuning
(``model.safetensors``), the LoRA adapter in peft's format for a LoRA run (``adapter/``:
``adapter_model.safetensors`` + ``adapter_config.json``, written by peft's ``save_pretrained``),
the trained layers' weights when only the top layers train; the frozen rest is the base model,
loaded again from the run's ``model`` spec on resume.

Each part (model, optimizer, scheduler, RNG states, ...) is one file of bots-rft's checkpoint
codec (:mod:`bots_rft.checkpoint`), the format the selector's file has too: ``NAME.safetensors``
holds the tensors and arrays, with the rest of the structure as JSON in its metadata, checksummed
and written atomically. The model's tensors are stored under their parameter names, so
``model.safetensors`` loads with safetensors alone. Beside it, ``NAME.json`` is a short manifest
(format, version, file name) that says the part exists. Nothing here is a pickle, so loading a
checkpoint cannot run code. Python's and numpy's RNG states are plain integers.

Checkpoints written before the codec was shared (``NAME.json`` holding the structure, tensors in
``NAME.safetensors`` under numbered names) are still read.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .. import checkpoint as codec
from ..errors import CheckpointError, ConfigError
from .distributed import Dist
from .lora import is_adapter_model, is_partly_frozen

__all__ = [
    "rng_state",
    "set_rng_state",
    "save_checkpoint",
    "latest_checkpoint",
    "load_training_state",
    "model_state",
    "load_model_state",
    "save_tree",
    "load_tree",
    "tree_exists",
    "CHECKPOINT_VERSION",
    "ADAPTER_DIR",
    "resolve_adapter",
]

#: 2: safetensors + JSON. Version 1, torch pickles, is refused: loading a pickle can run any
#: code. The layout of each part's files is the codec's business (:mod:`bots_rft.checkpoint`), not
#: this version's.
CHECKPOINT_VERSION = 2

#: A LoRA run's checkpoint keeps its adapter in this subdirectory (peft's layout).
ADAPTER_DIR = "adapter"
_ADAPTER_WEIGHTS = "adapter_model.safetensors"


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# ---------------------------------------------------------------------- the parts' files
def save_tree(directory: Path, name: str, obj: Any) -> None:
    """``obj`` (nested dicts, lists, tuples, scalars, tensors, numpy arrays) as
    ``directory/NAME.safetensors`` (the checkpoint codec's file), plus the manifest ``NAME.json``."""
    codec.save_tree_file(directory / f"{name}.safetensors", obj)
    manifest = {"format": codec.FORMAT, "version": codec.VERSION, "file": f"{name}.safetensors"}
    codec.atomic_write_bytes(directory / f"{name}.json", (json.dumps(manifest) + "\n").encode())


def tree_exists(directory: Path, name: str) -> bool:
    """Whether checkpoint ``directory`` holds the part :func:`save_tree` wrote as ``name``."""
    return (directory / f"{name}.json").exists() or (directory / f"{name}.safetensors").exists()


def load_tree(directory: Path, name: str) -> Any:
    """What :func:`save_tree` wrote; a missing, truncated or corrupt file is a CheckpointError."""
    meta = directory / f"{name}.json"
    data = directory / f"{name}.safetensors"
    if codec.is_checkpoint_file(data):  # the manifest is not needed to read it
        return codec.load_tree_file(data)
    doc: Any = None
    try:
        doc = json.loads(meta.read_text())
    except FileNotFoundError:
        pass
    except (ValueError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"checkpoint file {str(meta)!r} is corrupt or truncated ({exc})") from None
    if isinstance(doc, dict) and "tree" in doc:
        return _load_legacy_tree(directory, name, doc)
    if not data.exists():
        raise CheckpointError(f"checkpoint {str(directory)!r} is incomplete: missing {data.name!r}")
    return codec.load_tree_file(data)


def _load_legacy_tree(directory: Path, name: str, doc: dict[str, Any]) -> Any:
    """A part in the layout before the codec was shared: ``NAME.json`` holds the structure,
    ``NAME.safetensors`` (only when there are tensors) the tensors under numbered names."""
    from safetensors.torch import load_file

    meta = directory / f"{name}.json"
    try:
        tree, count = doc["tree"], int(doc["tensors"])
    except (ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"checkpoint file {str(meta)!r} is corrupt or truncated ({exc})") from None
    tensors: dict[str, torch.Tensor] = {}
    if count:
        path = directory / f"{name}.safetensors"
        try:
            tensors = load_file(str(path))
        except FileNotFoundError:
            raise CheckpointError(f"checkpoint {str(directory)!r} is incomplete: missing {path.name!r}") from None
        except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types
            raise CheckpointError(f"checkpoint file {str(path)!r} is corrupt or truncated ({exc})") from None
        if len(tensors) != count:
            raise CheckpointError(f"checkpoint file {str(path)!r} holds {len(tensors)} tensors, expected {count}")
    try:
        return codec._decode(tree, tensors)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise CheckpointError(f"checkpoint file {str(meta)!r} is corrupt ({exc})") from None


# --------------------------------------------------------------------------- model state
def model_state(model: Any, dist_: Dist) -> dict[str, torch.Tensor] | None:
    """The policy's trainable weights on CPU on rank 0, None elsewhere: the full (unsharded)
    state when every parameter trains, else only the trainable parameters (a LoRA adapter's
    tensors under their peft model names; the top layers' weights)."""
    if dist_.is_fsdp(model):
        from torch.distributed.fsdp import FullStateDictConfig, StateDictType
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        cfg = FullStateDictConfig(offload_to_cpu=True, rank0_only=True)
        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, cfg):
            sd = model.state_dict()
        return sd if dist_.is_main else None
    net = getattr(model, "module", model)
    if not dist_.is_main:
        return None
    if is_partly_frozen(net):
        return {k: p.detach().cpu() for k, p in net.named_parameters() if p.requires_grad}
    return {k: v.detach().cpu() for k, v in net.state_dict().items()}


def load_model_state(model: Any, state: dict[str, torch.Tensor], dist_: Dist) -> None:
    """Load what :func:`model_state` returned (or, for a peft model, the adapter file's tensors
    :func:`load_training_state` read): a partly frozen model takes exactly its trainable
    parameters, anything missing or extra is an error."""
    net = getattr(model, "module", model)
    if is_adapter_model(net):
        from peft.utils import set_peft_model_state_dict

        expected = {_adapter_key(k) for k, p in net.named_parameters() if p.requires_grad}
        _check_keys(expected, set(state), "adapter")
        result: Any = set_peft_model_state_dict(net, state)
        if result.unexpected_keys:
            raise RuntimeError(f"adapter: unexpected tensors {sorted(result.unexpected_keys)[:5]}")
        return
    if is_partly_frozen(net):
        expected = {k for k, p in net.named_parameters() if p.requires_grad}
        _check_keys(expected, set(state), "trainable weights")
        net.load_state_dict(state, strict=False)
        return
    if dist_.is_fsdp(model):
        from torch.distributed.fsdp import FullStateDictConfig, StateDictType
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT, FullStateDictConfig(rank0_only=False)):
            model.load_state_dict(state)
        return
    net.load_state_dict(state)


def _adapter_key(name: str) -> str:
    """A peft parameter's name as ``save_pretrained`` stores it (without the adapter's name)."""
    return name.replace(".default.", ".")


def _check_keys(expected: set[str], found: set[str], what: str) -> None:
    if expected != found:
        missing, extra = sorted(expected - found), sorted(found - expected)
        raise RuntimeError(f"{what}: the checkpoint lacks {missing[:5]} and has extra {extra[:5]}")


def _optim_state(model: Any, optimizer: torch.optim.Optimizer, dist_: Dist) -> dict[str, Any] | None:
    if dist_.is_fsdp(model):
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        sd = FSDP.optim_state_dict(model, optimizer)  # collective
        return sd if dist_.is_main else None
    return optimizer.state_dict() if dist_.is_main else None  # replicated under DDP


def save_checkpoint(
    root: Path,
    step: int,
    *,
    model: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    save_selector: Any,
    trainer_state: dict[str, Any],
    dist_: Dist,
    keep: int,
    save_extra: Any = None,
) -> Path:
    """Write ``root/step_XXXXXX`` (collective: every rank calls it). ``save_selector(dir)``
    writes the selector's file on rank 0, as does ``save_extra(dir)`` when given."""
    final = root / f"step_{step:06d}"
    tmp = root / f".step_{step:06d}.tmp"
    adapter = is_adapter_model(model)
    if adapter and dist_.is_fsdp(model):
        raise CheckpointError("checkpoint: LoRA runs are checkpointed under DDP only, not FSDP")
    weights = None if adapter else model_state(model, dist_)
    optim = _optim_state(model, optimizer, dist_)
    if dist_.is_main:
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
    dist_.barrier()
    save_tree(tmp, f"rng_rank{dist_.rank}", rng_state())
    if dist_.is_main:
        if adapter:
            # peft writes adapter_model.safetensors + adapter_config.json (no pickles).
            # The embeddings never train through the adapter: saying so also spares peft a look
            # for the base model's config (and its warning when there is none, as for a GGUF).
            getattr(model, "module", model).save_pretrained(
                str(tmp / ADAPTER_DIR), safe_serialization=True, save_embedding_layers=False
            )
        else:
            save_tree(tmp, "model", weights)
        save_tree(tmp, "optimizer", optim)
        save_tree(tmp, "scheduler", scheduler.state_dict())
        save_selector(tmp)
        if save_extra is not None:
            save_extra(tmp)
        save_tree(tmp, "trainer", {"version": CHECKPOINT_VERSION, "step": step, "world": dist_.world, **trainer_state})
    dist_.barrier()
    if dist_.is_main:
        for f in tmp.rglob("*"):
            if f.is_file():
                with open(f, "rb") as fh:
                    os.fsync(fh.fileno())
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        codec.atomic_write_bytes(root / "latest", (final.name + "\n").encode())  # fsyncs root too
        done = sorted(p for p in root.glob("step_*") if p.is_dir())
        for old in done[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    dist_.barrier()
    return final


def latest_checkpoint(root: Path) -> Path | None:
    pointer = root / "latest"
    if not pointer.exists():
        return None
    path = root / pointer.read_text().strip()
    if not path.is_dir():
        raise CheckpointError(f"{str(pointer)!r} points to {path.name!r}, which does not exist")
    return path


def resolve_adapter(path: str | os.PathLike[str]) -> Path:
    """The peft adapter directory that ``path`` names: an adapter directory itself
    (``adapter_config.json``), a LoRA run's checkpoint (its ``adapter/``), or a LoRA run's output
    directory or its ``checkpoints/`` (the latest checkpoint's adapter). Raises ConfigError
    naming ``adapter`` otherwise."""
    root = Path(path).expanduser()
    candidates = [root, root / ADAPTER_DIR]
    for ckpt_root in (root, root / "checkpoints"):
        try:
            latest = latest_checkpoint(ckpt_root)
        except CheckpointError as exc:
            raise ConfigError(f"adapter: {exc}") from exc
        if latest is not None:
            candidates.append(latest / ADAPTER_DIR)
    for candidate in candidates:
        if (candidate / "adapter_config.json").is_file():
            return candidate
    raise ConfigError(
        f"adapter: {str(path)!r} is neither a peft adapter directory (adapter_config.json) nor a LoRA run's "
        f"checkpoint (with {ADAPTER_DIR}/) nor a LoRA run's output directory (with checkpoints/latest)"
    )


def load_training_state(path: Path, dist_: Dist) -> dict[str, Any]:
    """Everything but the selector, checked: ``{"trainer", "model", "optimizer", "scheduler", "rng"}``."""
    if (path / "trainer.pt").exists() and not tree_exists(path, "trainer"):
        raise CheckpointError(
            f"checkpoint {str(path)!r} was written by an older bots-rft as torch pickles, which this version does "
            "not load (loading a pickle can run arbitrary code); start a new run, or resume it with the version "
            "that wrote it"
        )
    trainer = load_tree(path, "trainer")
    if not isinstance(trainer, dict):
        raise CheckpointError(f"checkpoint file {str(path / 'trainer.json')!r} is corrupt (not a mapping)")
    version = trainer.get("version")
    if not isinstance(version, int) or version > CHECKPOINT_VERSION:
        raise CheckpointError(
            f"checkpoint {str(path)!r} has version {version!r}; this bots-rft reads {CHECKPOINT_VERSION}"
        )
    if trainer.get("world") != dist_.world:
        raise CheckpointError(
            f"checkpoint {str(path)!r} was written by {trainer.get('world')} process(es), now {dist_.world}"
        )
    out: dict[str, Any] = {"trainer": trainer}
    if (path / ADAPTER_DIR).is_dir():
        out["model"] = _load_adapter(path / ADAPTER_DIR)
    else:
        out["model"] = load_tree(path, "model")
    for key, name in (
        ("optimizer", "optimizer"),
        ("scheduler", "scheduler"),
        ("rng", f"rng_rank{dist_.rank}"),
    ):
        out[key] = load_tree(path, name)
    return out


def _load_adapter(directory: Path) -> dict[str, torch.Tensor]:
    """The tensors of a LoRA checkpoint's adapter (peft's ``adapter_model.safetensors``)."""
    from safetensors.torch import load_file

    weights = directory / _ADAPTER_WEIGHTS
    if not weights.is_file():
        raise CheckpointError(
            f"checkpoint {str(directory.parent)!r} is incomplete: missing {ADAPTER_DIR}/{_ADAPTER_WEIGHTS}"
        )
    try:
        return load_file(str(weights))
    except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types
        raise CheckpointError(f"checkpoint file {str(weights)!r} is corrupt or truncated ({exc})") from None


#: What a training run writes into its out_dir; a directory holding any is refused unless resuming
#: it or overwriting it.
RUN_OUTPUTS = ("metrics.jsonl", "checkpoints", "tensorboard")


def prepare_out_dir(out_dir: Path, cfg: Any, dist_: Dist) -> None:
    """A directory holding another run is refused (nothing is written) unless ``cfg.resume``
    continues it or ``cfg.overwrite`` replaces it; overwriting removes that run's outputs first
    (rank 0, then every rank waits)."""
    if cfg.resume or not out_dir.is_dir():
        return
    used = [n for n in RUN_OUTPUTS if (out_dir / n).exists()]
    if not used:
        return
    if not cfg.overwrite:
        raise ConfigError(
            f"out_dir: {str(out_dir)!r} already holds a training run ({', '.join(used)}); continue it with "
            "--resume, replace it with --overwrite, or choose another directory"
        )
    if dist_.is_main:
        for name in used:
            target = out_dir / name
            shutil.rmtree(target) if target.is_dir() else target.unlink()
    dist_.barrier()
