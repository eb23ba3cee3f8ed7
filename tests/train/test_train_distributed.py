"""Two CPU processes on gloo: rank 0 owns the selector and broadcasts the batch, each rank rolls
out and trains its share under DDP, rewards come back for the update; also for dynamic
sampling, whose rounds of selection, rollout and scoring every rank runs together."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
mp = pytest.importorskip("torch.multiprocessing")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(rank: int, world: int, port: int, pool: str, out: str, method: str) -> None:
    import os

    os.environ.update(
        {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "RANK": str(rank),
            "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(rank),
        }
    )
    torch.set_num_threads(1)
    from bots_rft.train import load_config
    from bots_rft.train.toy import TOY_VERIFIER
    from bots_rft.train.trainer import GRPOTrainer

    # "bots": the trainer joins the group from the environment and destroys it at close.
    # "dynamic": the caller owns the group; the trainer uses it and leaves it alone.
    caller_owns = method == "dynamic"
    if caller_owns:
        torch.distributed.init_process_group("gloo")
    cfg = load_config(
        None,
        dict(
            pool=pool,
            model="tiny",
            device="cpu",
            steps=2,
            batch_size=4,
            rollouts=2,
            mini_batch_size=2,
            max_new_tokens=4,
            lr=1e-3,
            verifiers=TOY_VERIFIER,
            weak_column="weak_pass_rate",
            strong_column="strong_pass_rate",
            out_dir=f"{out}/{method}",
            progress=False,
            eval_every=0,
            tensorboard=False,
            method=method,
            oversample=2.0,
            max_rounds=2,
            # "dynamic" starts with a warm-up: rank 0 runs it in run(), then every rank holds
            # its weights (the replicas compared below would differ otherwise).
            sft_steps=2 if method == "dynamic" else 0,
            sft_batch_size=4,
        ),
    )
    trainer = GRPOTrainer(cfg)
    res = trainer.run()
    weights = sum(float(p.detach().double().sum()) for p in trainer.model.parameters())
    report = {
        method: {"steps": res.steps_done, "weights": weights, "history": res.history, "final_eval": res.final_eval}
    }
    trainer.close()
    assert torch.distributed.is_initialized() == caller_owns
    if caller_owns:
        torch.distributed.destroy_process_group()
    Path(out, f"{method}-rank{rank}.json").write_text(json.dumps(report))


def _spawn_or_fail(fn: Any, args: tuple[Any, ...], nprocs: int, hang_s: float = 600.0) -> None:
    """mp.spawn, but a hung rendezvous fails the test (and kills the ranks) instead of holding
    CI for the process group's 30-minute timeout. A guard against hangs, not a speed check."""
    ctx = mp.spawn(fn, args=args, nprocs=nprocs, join=False)
    deadline = time.monotonic() + hang_s
    while not ctx.join(timeout=5):
        if time.monotonic() > deadline:
            for proc in ctx.processes:
                proc.kill()
            pytest.fail(f"distributed workers still running after {hang_s:g}s: hung")


def test_two_gloo_processes(tmp_path: Path) -> None:
    from bots_rft.train.toy import write_toy_pool

    train_path, _ = write_toy_pool(tmp_path / "pool", num_tasks=10, eval_tasks=3)
    # A fresh pair of processes (and port) per method: re-initialising the default group in the
    # same process on the same MASTER_PORT can meet the previous group's store and hang in gloo's
    # rendezvous (seen once in CI), and torchrun never does that either.
    for method in ("bots", "dynamic"):
        _spawn_or_fail(_worker, (2, _free_port(), str(train_path), str(tmp_path), method), nprocs=2)
    r0 = {m: json.loads((tmp_path / f"{m}-rank0.json").read_text())[m] for m in ("bots", "dynamic")}
    r1 = {m: json.loads((tmp_path / f"{m}-rank1.json").read_text())[m] for m in ("bots", "dynamic")}
    for method in ("bots", "dynamic"):
        a, b = r0[method], r1[method]
        assert a["steps"] == b["steps"] == 2
        assert a["weights"] == pytest.approx(b["weights"], rel=1e-9, abs=1e-9)  # DDP kept replicas equal
        assert len(a["history"]) == 2 and b["history"] == []  # rank 0 owns the selector and the log
        for rec in a["history"]:
            assert len(rec["task_ids"]) == 4 and len(set(rec["task_ids"])) == 4
            assert len(rec["successes"]) == 4 and all(0 <= s <= 2 for s in rec["successes"])
        assert a["final_eval"]["tasks"] == 3 and b["final_eval"] is None  # eval sharded, gathered on rank 0
        ckpt = tmp_path / method / "checkpoints" / "step_000002"
        for rank in (0, 1):  # each rank's random state, as JSON + safetensors (no pickles)
            assert (ckpt / f"rng_rank{rank}.json").exists() and (ckpt / f"rng_rank{rank}.safetensors").exists()
        assert not list(ckpt.glob("*.pt"))
    assert sum(r["extra_rollouts"] for r in r0["dynamic"]["history"]) > 0
