#!/usr/bin/env bash
# Install (if needed) and run the CPU demo: synthetic GRPO steps through verl's own compute_advantage with
# algorithm.adv_estimator=hadw, logged by verl's console Tracking (hadw/* metrics on every step line).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_cpu.sh
venv=${VERL_HADW_VENV:-.venv}
exec "$venv/bin/verl-hadw" demo "$@"
