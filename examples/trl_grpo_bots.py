"""GRPO with TRL, BOTS choosing the prompts.

    # smoke run: a toy arithmetic pool, a tiny random-weight model, 2 steps on CPU, nothing
    # downloaded, into a fresh temporary --output-dir (seconds)
    python examples/trl_grpo_bots.py --smoke

    # the same pool and model, 3 steps, checkpoints in runs/trl_grpo_bots
    python examples/trl_grpo_bots.py

    # a GURU-layout parquet (prompt as chat messages, reward_model.ground_truth, extra_info.index,
    # qwen2.5_7b_pass_rate / qwen3_30b_pass_rate) with a local model directory
    python examples/trl_grpo_bots.py --parquet guru_math.parquet --model /models/Qwen2.5-1.5B-Instruct \
        --steps 100 --prompts-per-step 32 --num-generations 16 --max-completion-length 1024 --lr 1e-6

    # several GPUs: the same script under accelerate (every process builds the same selector)
    accelerate launch --num_processes 4 examples/trl_grpo_bots.py --parquet ... --model ...

    # resume: the newest checkpoint-<step>/ in --output-dir, BOTS selector included
    python examples/trl_grpo_bots.py --steps 6 --resume

BOTS logs ``bots/etr``, ``bots/mean_reward_of_picks``, ``bots/select_ms``, ``bots/update_ms``,
``bots/pick_mean_p10/p50/p90`` and (with reference pass rates) ``bots/capability`` into TRL's
logs, beside TRL's own metrics (``--report-to tensorboard`` or ``wandb`` to see them there).

The reward here is a plain "ground truth appears in the answer" check, enough for a demo; use a
real verifier (math-verify, bots_rft.rewards) for training. Needs the ``integrations`` extra
(``pip install 'bots-rft[integrations]'``).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach a hub at run time
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import numpy as np


def toy_pool(num_tasks: int, seed: int = 0) -> Any:
    """Sums of two numbers, in the GURU/verl layout, with made-up reference pass rates."""
    from datasets import Dataset

    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 10 ** rng.integers(1, 4, num_tasks)), rng.integers(0, 100, num_tasks)
    digits = np.array([len(str(x)) for x in a])
    weak = np.clip(1.1 - 0.3 * digits + rng.normal(0, 0.05, num_tasks), 0, 1)
    return Dataset.from_dict(
        {
            "prompt": [
                [{"role": "user", "content": f"What is {x} + {y}? Answer with the number."}] for x, y in zip(a, b)
            ],
            "reward_model": [{"ground_truth": str(x + y), "style": "rule"} for x, y in zip(a, b)],
            "data_source": ["toy_sum"] * num_tasks,
            "extra_info": [{"index": i} for i in range(num_tasks)],
            "qwen2.5_7b_pass_rate": weak.tolist(),
            "qwen3_30b_pass_rate": np.clip(weak + 0.3, 0, 1).tolist(),
        }
    )


def load_pool(path: str) -> Any:
    """A GURU-layout parquet, re-indexed so every row has its own task id (GURU's
    ``extra_info.index`` restarts in each domain file, so merged files repeat ids)."""
    from datasets import Dataset

    ds = Dataset.from_parquet(path)
    return ds.map(lambda row, i: {"extra_info": {**(row.get("extra_info") or {}), "index": i}}, with_indices=True)


def rates(ds: Any, column: str) -> np.ndarray | None:
    if column not in ds.column_names:
        return None
    return np.array([np.nan if v is None else float(v) for v in ds[column]], dtype=np.float64)


def answer_contains_ground_truth(completions: list[Any], reward_model: list[dict[str, Any]], **_: Any) -> list[float]:
    out = []
    for completion, rm in zip(completions, reward_model):
        text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
        out.append(float(str(rm["ground_truth"]).strip() in text))
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parquet", help="GURU-layout parquet (default: a toy pool)")
    p.add_argument("--model", default="tiny", help="'tiny', 'smollm2' or a local model directory / .gguf file")
    p.add_argument("--output-dir", default="runs/trl_grpo_bots")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--prompts-per-step", type=int, default=2, help="distinct tasks per generation (BOTS batch size)")
    p.add_argument("--num-generations", type=int, default=4, help="rollouts per task (n)")
    p.add_argument("--max-completion-length", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cpu", action="store_true", help="force CPU")
    p.add_argument("--resume", action="store_true", help="resume from the newest checkpoint in --output-dir")
    p.add_argument("--report-to", default="none", help="TRL/transformers reporters: none, tensorboard, wandb, ...")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="check the script runs: toy pool, tiny model, 2 steps on CPU, a temporary --output-dir unless given",
    )
    args = p.parse_args(argv)
    temporary: str | None = None
    if args.smoke:
        if args.parquet is not None or args.model != "tiny" or args.resume:
            p.error("--smoke: runs the toy pool on the tiny model from scratch; drop --parquet, --model and --resume")
        args.steps, args.cpu = min(args.steps, 2), True
        if args.output_dir == p.get_default("output_dir"):
            import tempfile

            args.output_dir = tempfile.mkdtemp(prefix="trl_grpo_bots_")
            temporary = args.output_dir  # removed once the run has read its checkpoint back

    import torch
    from trl import GRPOConfig, GRPOTrainer

    from bots_rft import BOTS, Interpolation
    from bots_rft.integrations.trl import attach_bots, load_selector
    from bots_rft.llm.models import load_model

    pool = load_pool(args.parquet) if args.parquet else toy_pool(64, args.seed)
    weak, strong = rates(pool, "qwen2.5_7b_pass_rate"), rates(pool, "qwen3_30b_pass_rate")
    evidence = Interpolation(weak, strong) if weak is not None and strong is not None else None
    # Identical on every process: same seed, same pool. n_rollouts = rollouts per task.
    selector = BOTS(len(pool), evidence=evidence, n_rollouts=args.num_generations, seed=args.seed)

    use_cpu = args.cpu or not torch.cuda.is_available()
    model, tokenizer = load_model(args.model, device="cpu" if use_cpu else None)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    config = GRPOConfig(
        output_dir=args.output_dir,
        max_steps=args.steps,
        # One optimiser step per generation: prompts-per-step x num-generations completions, spread
        # over the processes (the paper: 256 prompts x 16 rollouts, mini-batches of 32 prompts).
        per_device_train_batch_size=args.prompts_per_step * args.num_generations // world,
        num_generations=args.num_generations,
        max_completion_length=args.max_completion_length,
        learning_rate=args.lr,
        weight_decay=0.1,
        max_grad_norm=1.0,
        epsilon=0.2,
        temperature=1.0,
        beta=0.0,
        use_cpu=use_cpu,
        bf16=not use_cpu,
        logging_steps=1,
        save_steps=max(1, args.steps // 2),
        report_to=[] if args.report_to == "none" else args.report_to.split(","),
        seed=args.seed,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[answer_contains_ground_truth],
        args=config,
        train_dataset=pool,
        processing_class=tokenizer,
    )
    hook = attach_bots(trainer, selector, task_id_column="extra_info.index")
    trainer.train(resume_from_checkpoint=True if args.resume else None)  # restores the selector too

    if trainer.accelerator.is_main_process:
        mean = selector.mean()
        print(
            f"BOTS fed {hook.num_feeds} generations; last chunk: {hook.last_task_ids.tolist() if hook.last_task_ids is not None else []}"
        )
        print(f"posterior mean range [{mean.min():.3f}, {mean.max():.3f}], capability {selector.capability}")
        print("last generation's BOTS metrics:", {k: round(v, 4) for k, v in hook.last_metrics.items()})
        selector.save(os.path.join(args.output_dir, "bots_selector.bots"))
        # The selector as the last checkpoint holds it (what --resume restores).
        last = os.path.join(args.output_dir, f"checkpoint-{trainer.state.global_step}")
        if os.path.isdir(last):
            if not np.array_equal(load_selector(last).mean(), mean):
                raise SystemExit(f"{last}: the checkpointed selector differs from the live one")
            print(f"selector checkpointed in {last} and read back: identical posterior")
    if temporary is not None and trainer.accelerator.is_main_process:
        import shutil

        shutil.rmtree(temporary, ignore_errors=True)
        print(f"removed the temporary output folder {temporary}")


if __name__ == "__main__":
    main()
