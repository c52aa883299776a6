#!/usr/bin/env bash
# The CPU demo: install (if needed), build the toy assets, then train a tiny random Qwen2 on the four-tier
# character task with GRPO + HA-DW through verl's own `python -m verl.trainer.main_ppo` (v1 trainer, config
# configs/cpu/demo.yaml, 30 steps), print the per-step HA-DW metrics and the reward's rise, plot them
# (runs/demo/demo.png) and save verl checkpoints (with the anchor).
# Extra arguments are Hydra overrides, e.g. algorithm.adv_estimator=dgpo or trainer.total_training_steps=5.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_cpu.sh
venv=${VERL_HADW_VENV:-.venv}
source scripts/bytecode.sh  # .pyc on first import, under the venv
py="$venv/bin/python"
out=runs/demo
# --demo: log, PNG and checkpoints (removed first: a fresh run, not a resume) in $out; experiment "demo", saves at 15, 30
"$py" -m verl_hadw.toy.launch --assets runs/cpu_assets --demo "$out" -- "$@"
echo "checkpoints (verl's, each with verl_hadw_anchor.json): $out/checkpoints"
ls "$out/checkpoints"
