#!/usr/bin/env bash
# The CPU demo: install (if needed), build the toy assets, then train a tiny random Qwen2 on the four-tier
# character task with GRPO + HA-DW through verl's own `python -m verl.trainer.main_ppo` (v1 trainer, config
# configs/cpu/demo.yaml, 30 steps), print the per-step HA-DW metrics and the reward's rise, plot them
# (runs/demo/demo.png) and save verl checkpoints (with the anchor).
# Extra arguments are Hydra overrides, e.g. algorithm.adv_estimator=dgpo or trainer.total_training_steps=5.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_cpu.sh
py="${VERL_HADW_VENV:-.venv}/bin/python"
out=runs/demo
rm -rf "$out/checkpoints"
"$py" -m verl_hadw.toy.launch --assets runs/cpu_assets --log "$out/main_ppo.log" --plot "$out/demo.png" -- \
  trainer.experiment_name=demo trainer.default_local_dir="$PWD/$out/checkpoints" trainer.save_freq=15 "$@"
echo "checkpoints (verl's, each with verl_hadw_anchor.json): $out/checkpoints"
ls "$out/checkpoints"
