"""torch.distributed plumbing for data-parallel training (``torchrun``): which rank this is,
sharding a batch's tasks, moving Python objects (task ids, rewards) between ranks, and wrapping
the model in DDP or FSDP. A single process is the world-size-1 case of the same code."""

from __future__ import annotations

import contextlib
import datetime
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist

__all__ = ["Dist"]

T = TypeVar("T")


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    owns_group: bool = False  # this object initialised the process group (and destroys it)

    @classmethod
    def from_env(cls, device_type: str) -> Dist:
        """Join the process group ``torchrun`` (or a test's spawner) describes in the
        environment (RANK, WORLD_SIZE, MASTER_ADDR/PORT); NCCL on CUDA, gloo on CPU."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls()
        owns = False
        if not dist.is_initialized():
            backend = "nccl" if device_type == "cuda" else "gloo"
            dist.init_process_group(backend=backend, timeout=datetime.timedelta(minutes=30))
            owns = True
        return cls(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")), owns)

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def shard(self, items: Sequence[T]) -> list[T]:
        """This rank's contiguous share (sizes differ by at most one)."""
        n = len(items)
        lo = self.rank * n // self.world
        hi = (self.rank + 1) * n // self.world
        return list(items[lo:hi])

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank."""
        if not self.enabled:
            return obj
        box = [obj if self.is_main else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, in rank order, on every rank."""
        if not self.enabled:
            return [obj]
        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def sum(self, value: float) -> float:
        if not self.enabled:
            return value
        t = torch.tensor([float(value)], dtype=torch.float64)
        if dist.get_backend() == "nccl":
            t = t.cuda()
        dist.all_reduce(t)
        return float(t.item())

    def sync_params(self, module: torch.nn.Module) -> None:
        """Rank 0's parameters and buffers on every rank, after rank 0 alone changed them (the
        warm-up, which runs on rank 0 after DDP's broadcast at wrapping)."""
        if not self.enabled:
            return
        with torch.no_grad():
            for tensor in [*module.parameters(), *module.buffers()]:
                dist.broadcast(tensor.data, src=0)

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def close(self) -> None:
        if self.owns_group and dist.is_initialized():
            dist.destroy_process_group()

    # ------------------------------------------------------------------ model wrapping
    def wrap(self, model: torch.nn.Module, kind: str, device: torch.device) -> torch.nn.Module:
        """DDP (parameters broadcast from rank 0 at construction, so only rank 0 needs the
        warm-up) or FSDP with full sharding per decoder layer. World size 1: unchanged."""
        if not self.enabled:
            return model
        if kind == "fsdp":
            from functools import partial

            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
            from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

            layer_cls = {type(m) for m in model.modules() if type(m).__name__.endswith("DecoderLayer")}
            policy = partial(transformer_auto_wrap_policy, transformer_layer_cls=layer_cls) if layer_cls else None
            return FSDP(
                model,
                auto_wrap_policy=policy,
                use_orig_params=True,
                sync_module_states=True,
                device_id=device if device.type == "cuda" else None,
            )
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model, device_ids=[device.index] if device.type == "cuda" else None)

    @staticmethod
    def is_fsdp(model: Any) -> bool:
        return type(model).__name__ == "FullyShardedDataParallel"

    @contextlib.contextmanager
    def full_params(self, model: Any) -> Iterator[None]:
        """FSDP: gather the full weights for ``generate`` (which bypasses FSDP's forward hooks);
        anything else: nothing to do."""
        if self.is_fsdp(model):
            from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

            with FSDP.summon_full_params(model, writeback=False, recurse=True):
                yield
        else:
            yield

    def no_sync(self, model: Any, skip: bool) -> contextlib.AbstractContextManager[Any]:
        """Gradient accumulation: skip the all-reduce on every micro-batch but the last."""
        if skip and hasattr(model, "no_sync"):
            return model.no_sync()  # type: ignore[no-any-return]
        return contextlib.nullcontext()
