"""Trainer checkpoints: a directory per step with the model, optimizer, scheduler, selector (in
its own format), every rank's RNG states, the step and the pool's identity; written into a
temporary directory and renamed into place, with a ``latest`` pointer written atomically, so a
kill mid-save never leaves a checkpoint that looks complete but is not.

The policy's part is its trainable weights only: everything for full fine-tuning
(``model.safetensors``), the LoRA adapter in peft's format for a LoRA run (``adapter/``:
``adapter_model.safetensors`` + ``adapter_config.json``, written by peft's ``save_pretrained``),
the trained layers' weights when only the top layers train; the frozen rest is the base model,
loaded again from the run's ``model`` spec on resume.

Nothing here is a pickle, so loading a checkpoint cannot run code: tensors are stored with
safetensors, everything else as JSON (``NAME.json`` holds the structure, with each tensor replaced
by a reference into ``NAME.safetensors``). Python's and numpy's RNG states are plain integers.
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

from ..errors import CheckpointError
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
    "CHECKPOINT_VERSION",
    "ADAPTER_DIR",
]

#: 2: safetensors + JSON (version 1 was torch pickles, which are no longer loaded).
CHECKPOINT_VERSION = 2

_TENSOR, _TUPLE, _DICT, _NDARRAY = "__tensor__", "__tuple__", "__dict__", "__ndarray__"

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


# ---------------------------------------------------------------------- tensors + JSON
def _encode(obj: Any, tensors: dict[str, torch.Tensor], seen: set[int]) -> Any:
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu()
        if t.data_ptr() in seen or not t.is_contiguous():  # tied weights: safetensors wants one owner
            t = t.clone().contiguous()
        if t.numel():
            seen.add(t.data_ptr())
        key = str(len(tensors))
        tensors[key] = t
        return {_TENSOR: key}
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise CheckpointError("state: object arrays cannot be stored")
        return {_NDARRAY: obj.tolist(), "dtype": obj.dtype.str, "shape": list(obj.shape)}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, tuple):
        return {_TUPLE: [_encode(v, tensors, seen) for v in obj]}
    if isinstance(obj, list):
        return [_encode(v, tensors, seen) for v in obj]
    if isinstance(obj, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in obj):
            return {k: _encode(v, tensors, seen) for k, v in obj.items()}
        return {_DICT: [[_encode(k, tensors, seen), _encode(v, tensors, seen)] for k, v in obj.items()]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise CheckpointError(f"state: cannot store a value of type {type(obj).__name__}")


def _decode(node: Any, tensors: dict[str, torch.Tensor], where: str) -> Any:
    if isinstance(node, list):
        return [_decode(v, tensors, where) for v in node]
    if not isinstance(node, dict):
        return node
    if _TENSOR in node:
        key = node[_TENSOR]
        if key not in tensors:
            raise CheckpointError(f"{where}: refers to tensor {key!r}, which its .safetensors file lacks")
        return tensors[key]
    if _NDARRAY in node:
        return np.asarray(node[_NDARRAY], dtype=np.dtype(node["dtype"])).reshape(node["shape"])
    if _TUPLE in node:
        return tuple(_decode(v, tensors, where) for v in node[_TUPLE])
    if _DICT in node:
        return {_hashable(_decode(k, tensors, where)): _decode(v, tensors, where) for k, v in node[_DICT]}
    return {k: _decode(v, tensors, where) for k, v in node.items()}


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


def save_tree(directory: Path, name: str, obj: Any) -> None:
    """``obj`` (nested dicts, lists, tuples, scalars, tensors, small numpy arrays) as
    ``directory/name.json`` plus, when it holds tensors, ``directory/name.safetensors``."""
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    tree = _encode(obj, tensors, set())
    if tensors:
        save_file(tensors, str(directory / f"{name}.safetensors"))
    (directory / f"{name}.json").write_text(json.dumps({"tree": tree, "tensors": len(tensors)}, allow_nan=True))


def load_tree(directory: Path, name: str) -> Any:
    """What :func:`save_tree` wrote; a missing, truncated or corrupt file is a CheckpointError."""
    from safetensors.torch import load_file

    meta = directory / f"{name}.json"
    try:
        doc = json.loads(meta.read_text())
        tree, count = doc["tree"], int(doc["tensors"])
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {str(directory)!r} is incomplete: missing {meta.name!r}") from None
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
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
        return _decode(tree, tensors, str(meta))
    except (ValueError, TypeError, KeyError) as exc:
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
        pointer = root / ".latest.tmp"
        pointer.write_text(final.name + "\n")
        os.replace(pointer, root / "latest")
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


def load_training_state(path: Path, dist_: Dist) -> dict[str, Any]:
    """Everything but the selector, checked: ``{"trainer", "model", "optimizer", "scheduler", "rng"}``."""
    if (path / "trainer.pt").exists() and not (path / "trainer.json").exists():
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
