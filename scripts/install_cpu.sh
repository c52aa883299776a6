#!/usr/bin/env bash
# Install verl-hadw with its CPU dependencies into a virtualenv (default: .venv in the checkout).
# torch is pinned to the CPU build 2.13.0 by constraints-cpu.txt; GPU-only packages are never installed.
# Idempotent: re-runs only when setup.py or the constraints change. Override the venv with VERL_HADW_VENV.
# --check: install nothing; exit 0 if the venv holds this checkout's install (setup.py and constraints), else 1.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VERL_HADW_VENV:-.venv}
stamp="$venv/.verl-hadw-install"
want=$(cat setup.py constraints-cpu.txt | sha256sum | cut -c1-16)
if [[ ${1:-} == --check ]]; then
  [ "$(cat "$stamp" 2>/dev/null)" == "$want" ]
  exit
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[install] verl-hadw + verl 0.9.1 + CPU torch into $venv (about a minute on a new machine)"
  "$venv/bin/python" -m pip install -q -U pip
  # --no-compile: pip would compile all ~20,000 modules' .pyc (~75 core-s); the runs import ~4,500 of them, and
  # scripts/bytecode.sh lets Python write those on first import, under the venv
  "$venv/bin/python" -m pip install -q --no-compile -c constraints-cpu.txt -e ".[verl,repro,research,test,trl]"
  echo "$want" > "$stamp"
fi
