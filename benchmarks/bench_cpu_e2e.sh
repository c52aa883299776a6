#!/usr/bin/env bash
# grpo vs hadw vs dgpo steady-state step time through verl's main_ppo on CPU (see bench_cpu_e2e.py).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_cpu.sh
exec "${VERL_HADW_VENV:-.venv}/bin/python" benchmarks/bench_cpu_e2e.py "$@"
