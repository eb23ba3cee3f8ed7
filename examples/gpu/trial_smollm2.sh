#!/usr/bin/env bash
# NOT YET RUN ON A GPU (see README.md). The pre-registered trial of configs/trial_smollm2_gpu.yaml:
# SmolLM2-135M-Instruct, Random vs BOTS, 16 paired seeds x 30 GRPO steps x 16 tasks x 8 rollouts.
#
#   bash examples/gpu/trial_smollm2.sh prepare [--smoke] [ARGS...]   # CPU, beforehand
#   bash examples/gpu/trial_smollm2.sh run [--smoke] [ARGS...]       # GPU, one call
#
# prepare: builds the pool (configs/pool_smollm2_trial.yaml) into $POOL, measures both reference
#   columns with `bots refeval` (8 samples on each of 1,173 training tasks, twice, plus a 100-step
#   supervised warm-up: on a 2-core CPU this has not been timed; expect hours), draws their
#   histogram, packs the two parquet files into $POOL.tar.gz and builds the abi3 wheel into .whl/
#   (the GPU machine has no Rust). Every stage that is done is skipped, and an interrupted
#   `bots refeval` resumes from its progress file: run it again until it ends. ARGS go to both
#   `bots refeval` calls (e.g. --batch-size 128).
# run: `bots compare` with the trial's config into $OUT/trial_smollm2 (OUT default runs/gpu),
#   --reuse (the same command continues an interrupted trial), then prints the outcome line of
#   summary.md. ARGS go to `bots compare` (options first, then KEY=VALUE overrides). With
#   TIME_LIMIT=SECONDS the runs are stopped by SIGTERM after that long: each checkpoints its last
#   finished step, and the same command continues them.
# --smoke: the same pipeline at a tiny size on the CPU (the random-weight tiny model, a pool of
#   2 tasks per generator and level, 2 warm-up steps, `bots compare --smoke`), under
#   $OUT/trial_smollm2_smoke: a check that the script works end to end, not a result.
#
# Environment: POOL (default runs/pools/smollm2_trial), OUT, TIME_LIMIT, PYTHON (default python3).
# Without a `bots` command on PATH, `$PYTHON -m bots_rft.cli` is used (the wheel installed with
# pip --target and PYTHONPATH, as on a machine without the entry point).
set -euo pipefail
cd "$(dirname "$0")/../.."

usage="usage: bash examples/gpu/trial_smollm2.sh {prepare|run} [--smoke] [ARGS...]"
sub=${1:-}
case "$sub" in
  prepare | run) shift ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
smoke=0
args=()
for a in "$@"; do
  if [ "$a" = "--smoke" ]; then smoke=1; else args+=("$a"); fi
done

PYTHON=${PYTHON:-python3}
if command -v bots >/dev/null 2>&1; then BOTS=(bots); else BOTS=("$PYTHON" -m bots_rft.cli); fi
CONFIG=configs/trial_smollm2_gpu.yaml
WEAK=smollm2_base_pass_rate   # the config's weak_column
STRONG=smollm2_sft100_pass_rate # the config's strong_column
OUT_ROOT=${OUT:-runs/gpu}
if [ "$smoke" = 1 ]; then
  SMOKE_DIR=$OUT_ROOT/trial_smollm2_smoke
  POOL=${POOL:-$SMOKE_DIR/pool}
  STRONG_RUN=$SMOKE_DIR/strong
  COMPARE_OUT=$SMOKE_DIR/compare
  MODEL=tiny SFT_STEPS=2 ROLLOUTS=2 NEW_TOKENS=4
  SCORE_IN_PROCESS=(--workers 0) # no verifier process to start: seconds on a small CPU
  # the strong column keeps the config's name (sft100) though the smoke warm-up is 2 steps
  TINY=(model=tiny device=cpu)
else
  POOL=${POOL:-runs/pools/smollm2_trial}
  STRONG_RUN=runs/real/smollm2_trial_strong
  COMPARE_OUT=$OUT_ROOT/trial_smollm2
  MODEL=smollm2 SFT_STEPS=100 ROLLOUTS=8 NEW_TOKENS=32 # the config's max_new_tokens, temperature 0.7
  SCORE_IN_PROCESS=()
  TINY=()
fi
# The config reads runs/pools/smollm2_trial/train.parquet; any other POOL is passed as an override.
POOL_KEY=()
if [ "$POOL" != runs/pools/smollm2_trial ]; then POOL_KEY=(pool="$POOL/train.parquet"); fi

has_column() { # POOL_FILE COLUMN: whether the parquet file has that column
  "$PYTHON" -c 'import sys, pyarrow.parquet as pq; sys.exit(sys.argv[2] not in pq.read_schema(sys.argv[1]).names)' "$1" "$2"
}

prepare() {
  if [ ! -f "$POOL/train.parquet" ]; then
    spec=configs/pool_smollm2_trial.yaml
    if [ "$smoke" = 1 ]; then
      mkdir -p "$SMOKE_DIR"
      sed -E 's/^per_level: .*/per_level: 2/' "$spec" >"$SMOKE_DIR/pool_spec.yaml"
      spec=$SMOKE_DIR/pool_spec.yaml
    fi
    "${BOTS[@]}" data spread --config "$spec" --out "$POOL"
  fi
  local refeval=(--rollouts "$ROLLOUTS" --max-new-tokens "$NEW_TOKENS" --temperature 0.7 --device cpu
    ${SCORE_IN_PROCESS[@]+"${SCORE_IN_PROCESS[@]}"})
  if ! has_column "$POOL/train.parquet" "$WEAK"; then
    "${BOTS[@]}" refeval --model "$MODEL" --pool "$POOL/train.parquet" --column "$WEAK" "${refeval[@]}" ${args[@]+"${args[@]}"}
  fi
  if ! has_column "$POOL/train.parquet" "$STRONG"; then
    "${BOTS[@]}" compare --config "$CONFIG" --warmup-only --out "$STRONG_RUN" --reuse \
      sft_steps="$SFT_STEPS" device=cpu ${POOL_KEY[@]+"${POOL_KEY[@]}"} ${TINY[@]+"${TINY[@]}"}
    "${BOTS[@]}" refeval --model "$STRONG_RUN/warmup" --pool "$POOL/train.parquet" --column "$STRONG" \
      "${refeval[@]}" ${args[@]+"${args[@]}"}
  fi
  "${BOTS[@]}" data spread --config configs/pool_smollm2_trial.yaml --out "$POOL" --histogram "$WEAK,$STRONG"
  # The pack: the two parquet files (what the GPU call reads besides the code), one file to carry.
  tar -czf "$POOL.tar.gz" -C "$(dirname "$POOL")" "$(basename "$POOL")/train.parquet" "$(basename "$POOL")/eval.parquet"
  if [ "$smoke" = 0 ]; then
    # The GPU machine has no Rust: the package as an abi3 wheel (any CPython >= 3.10).
    if command -v maturin >/dev/null 2>&1; then
      rm -f .whl/bots_rft-*.whl
      maturin build --release --out .whl
    else
      echo "trial_smollm2.sh: no maturin here: build the wheel with 'maturin build --release --out .whl'" >&2
    fi
  fi
  echo "trial_smollm2.sh: prepared $POOL ($WEAK, $STRONG; histogram in $POOL/pass_rates.md), packed $POOL.tar.gz"
}

run() {
  if [ ! -f "$POOL/train.parquet" ] && [ -f "$POOL.tar.gz" ]; then
    mkdir -p "$(dirname "$POOL")"
    tar -xzf "$POOL.tar.gz" -C "$(dirname "$POOL")"
  fi
  for column in "$WEAK" "$STRONG"; do
    if [ ! -f "$POOL/train.parquet" ] || ! has_column "$POOL/train.parquet" "$column"; then
      echo "trial_smollm2.sh: $POOL/train.parquet has no column $column: run 'prepare' first (on a CPU)" >&2
      exit 2
    fi
  done
  local compare=("${BOTS[@]}" compare --config "$CONFIG" --out "$COMPARE_OUT" --reuse)
  local extra=(${POOL_KEY[@]+"${POOL_KEY[@]}"})
  if [ "$smoke" = 1 ]; then
    compare+=(--smoke --jobs 1 --no-progress)
    extra+=("${TINY[@]}" reward_workers=0)
  fi
  if [ -n "${TIME_LIMIT:-}" ]; then compare=(timeout --signal=TERM --kill-after=120 "$TIME_LIMIT" "${compare[@]}"); fi
  local rc=0
  "${compare[@]}" ${args[@]+"${args[@]}"} ${extra[@]+"${extra[@]}"} || rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 143 ]; then
    echo "trial_smollm2.sh: stopped at the time limit; finished runs and checkpoints are in $COMPARE_OUT:" \
      "run the same command again to continue" >&2
  fi
  if [ "$rc" != 0 ]; then exit "$rc"; fi
  echo "trial_smollm2.sh: $COMPARE_OUT/summary.md, $COMPARE_OUT/held_out.csv"
  grep -m1 "Outcome under the rule" "$COMPARE_OUT/summary.md"
}

"$sub"
