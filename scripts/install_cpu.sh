#!/usr/bin/env bash
# Install verl-hadw with its CPU dependencies into a virtualenv (default: .venv in the checkout).
# torch is pinned to the CPU build 2.13.0 by constraints-cpu.txt; GPU-only packages are never installed.
# Idempotent: re-runs only when setup.py or the constraints change. Override the venv with VERL_HADW_VENV.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${VERL_HADW_VENV:-.venv}
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
stamp="$venv/.verl-hadw-install"
want=$(cat setup.py constraints-cpu.txt | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[install] verl-hadw + verl 0.9.1 + CPU torch into $venv (about 2 minutes on a new machine)"
  "$venv/bin/python" -m pip install -q -U pip
  # pip compiles the ~20,000 modules' .pyc one file at a time (~70 s on one core); compileall does the same on
  # every core. Files that do not compile are skipped, as pip skips them.
  "$venv/bin/python" -m pip install -q --no-compile -c constraints-cpu.txt -e ".[verl,repro,research,test,trl]"
  "$venv/bin/python" -m compileall -qq -j 0 "$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" verl_hadw || true
  echo "$want" > "$stamp"
fi
