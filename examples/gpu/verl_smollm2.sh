#!/usr/bin/env bash
# NOT YET RUN ON A GPU (see README.md). verl 0.9.1 V1 + BOTS on SmolLM2-135M-Instruct, one GPU.
# Pass --check as the first argument to validate the command without a GPU (the test suite does).
set -euo pipefail
cd "$(dirname "$0")/../.."
MODEL=${SMOLLM2_HF_DIR:-runs/gpu/smollm2-hf}  # any Hugging Face model folder will do
if [ ! -f "$MODEL/config.json" ]; then
  # verl loads Hugging Face folders, not GGUF: save the packaged model as one (offline, ~0.5 GB).
  python -c "import sys; from bots_rft.llm.models import load_model; m, t = load_model('smollm2', device='cpu', dtype='float32'); m.save_pretrained(sys.argv[1]); t.save_pretrained(sys.argv[1])" "$MODEL"
fi
CHECK=()
if [ "${1:-}" = "--check" ]; then CHECK=(--check); shift; fi
exec python -m bots_rft.integrations.verl "${CHECK[@]}" \
  algorithm.adv_estimator=grpo \
  data.train_files=examples/data/verl_toy/train.parquet data.val_files=examples/data/verl_toy/val.parquet \
  data.train_batch_size=8 data.max_prompt_length=128 data.max_response_length=128 \
  actor_rollout_ref.model.path="$MODEL" actor_rollout_ref.rollout.n=8 actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.4 actor_rollout_ref.rollout.tensor_model_parallel_size=1 \
  actor_rollout_ref.actor.optim.lr=1e-6 actor_rollout_ref.actor.ppo_mini_batch_size=8 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8 \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8 actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8 \
  algorithm.filter_groups.enable=true algorithm.filter_groups.metric=reward \
  bots.weak_column=qwen2.5_7b_pass_rate bots.strong_column=qwen3_30b_pass_rate \
  trainer.n_gpus_per_node=1 trainer.nnodes=1 trainer.logger=console trainer.total_training_steps=20 \
  trainer.save_freq=10 trainer.test_freq=-1 trainer.val_before_train=false \
  trainer.default_local_dir=runs/gpu/verl_smollm2 "$@"
