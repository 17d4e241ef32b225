#!/usr/bin/env bash
# The seed's ablation at small scale (docs/results.md, stage 2, "The ablation: four policies,
# held-out task families, real verifiers"): the same held-out task set for every policy.
#   bench/ablation.sh RUNS_DIR [STEPS]
# Each step is resumable: re-run the script after an interruption. On 2 CPU cores the two
# trainings take hours; run it in the background and keep other model jobs off the machine.
# The simulator's reward is lwm's default: the trained verdict since 2026-12-05; the table in
# docs/results.md was made with the probe (add --reward auto to the sim training to redo it).
set -euo pipefail
runs=${1:?usage: bench/ablation.sh RUNS_DIR [STEPS]}
steps=${2:-100}
lwm=(${LWM:-.venv/bin/lwm})
domains=(--domain terminal --domain db --domain code)
eval_args=("${domains[@]}" --split heldout --tasks 20 --seed 0 --max-turns 2 --concurrency 2 --no-progress)
train_args=("${domains[@]}" --tasks 32 --max-task-steps 1 --max-turns 1 --num-generations 4 --prompts-per-step 2
            --max-steps "$steps" --max-new-tokens 48 --save-steps 10 --no-progress)
mkdir -p "$runs"
resume() { [ -d "$1" ] && ls "$1"/checkpoint-* >/dev/null 2>&1 && echo --resume || true; }

"${lwm[@]}" agent eval --policy oracle "${eval_args[@]}" --out "$runs/eval-oracle"
"${lwm[@]}" agent eval --policy embedded "${eval_args[@]}" --out "$runs/eval-base"
"${lwm[@]}" agent eval --policy embedded-warmup "${eval_args[@]}" --out "$runs/eval-warmup"
[ -f "$runs/rl-sim/adapter.gguf" ] || "${lwm[@]}" train rl --out "$runs/rl-sim" --backend sim "${train_args[@]}" \
    $(resume "$runs/rl-sim")
"${lwm[@]}" agent eval --policy "$runs/rl-sim" "${eval_args[@]}" --out "$runs/eval-rl-sim"
[ -f "$runs/rl-real/adapter.gguf" ] || "${lwm[@]}" train rl --out "$runs/rl-real" --backend real "${train_args[@]}" \
    $(resume "$runs/rl-real")
"${lwm[@]}" agent eval --policy "$runs/rl-real" "${eval_args[@]}" --out "$runs/eval-rl-real"
