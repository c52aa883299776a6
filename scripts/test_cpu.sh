#!/usr/bin/env bash
# Install nox and uv (once, into .venv-nox) and run CI's set of nox sessions (noxfile.py, `nox -t ci`): lint, the
# type check, the docs build, the main suite, the lowest and the highest release of each framework's range, and the
# comparison across frameworks (in two lanes, below). This is what CI runs (.ci/run). Arguments go to nox instead: `-s trl-1.0.0`, or
# `-s tests -- tests/core` (after --, pytest's). A failing session names itself in nox's summary at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
begin=$SECONDS
tools=${VERL_HADW_NOX_VENV:-.venv-nox}
if [ ! -x "$tools/bin/nox" ]; then
  echo "[test_cpu] nox and uv into $tools"
  python3 -m venv "$tools"
  "$tools/bin/python" -m pip install -q "nox==2026.10.20" "uv==0.13.9"
fi
case $tools in /*) ;; *) tools=$PWD/$tools ;; esac
export PATH="$tools/bin:$PATH"
status=0
if [ $# -gt 0 ]; then
  nox "$@" || status=$?
else
  # CI's set (nox -t ci) in two lanes, then the comparison, which reads what the framework sessions kept: the ms-swift
  # and Axolotl sessions spend much of their time in one process at a time (a framework's own launcher), so they run
  # beside the main suite instead of after it. The second lane's output follows the first's.
  lane=$(mktemp)
  nox -t ci -k "trl or swift or axolotl" > "$lane" 2>&1 &
  frameworks=$!
  nox -t ci -k "not (trl or swift or axolotl or compare)" || status=$?
  wait "$frameworks" || status=$?
  cat "$lane" && rm -f "$lane"
  nox -s compare || status=$?
fi
echo "[test_cpu] nox exit $status; $((SECONDS - begin)) s in all"
exit "$status"
