#!/usr/bin/env bash
# The CPU demo: install (if needed), build the toy assets, then train a tiny random Qwen2 on the four-tier
# character task with GRPO + HA-DW through verl's own `python -m verl.trainer.main_ppo` (v1 trainer, config
# configs/cpu/demo.yaml, 30 steps), print the per-step HA-DW metrics and the reward's rise, plot them
# (runs/demo/demo.png) and save verl checkpoints (with the anchor).
# Extra arguments are Hydra overrides, e.g. algorithm.adv_estimator=dgpo or trainer.total_training_steps=5.
# `--task arith` first: the arithmetic task from its pretrained model (configs/cpu/task/arith.yaml, 60 steps), with the
# held-out accuracy per tier at steps 0, 30 and 60.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_cpu.sh
venv=${VERL_HADW_VENV:-.venv}
source scripts/bytecode.sh  # .pyc on first import, under the venv
py="$venv/bin/python"
task=toy
if [ "${1:-}" = "--task" ]; then task=$2; shift 2; fi  # --task arith: sums and products from a pretrained model
out=runs/demo
[ "$task" = toy ] || out=runs/demo_$task
# --demo: log, PNG and checkpoints (removed first: a fresh run, not a resume) in $out; experiment "demo", saves every 15
"$py" -m verl_hadw.toy.launch --task "$task" --demo "$out" -- "$@"
echo "checkpoints (verl's, each with verl_hadw_anchor.json): $out/checkpoints"
ls "$out/checkpoints"
