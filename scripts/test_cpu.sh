#!/usr/bin/env bash
# Install nox and uv (once, into .venv-nox) and run CI's set of nox sessions (noxfile.py, `nox -t ci`): lint, the
# type check, the docs build, the main suite, the lowest and the highest release of each framework's range, and the
# comparison across frameworks. This is what CI runs (.ci/run). Arguments go to nox instead: `-s trl-1.0.0`, or
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
[ $# -gt 0 ] || set -- -t ci
status=0
nox "$@" || status=$?
echo "[test_cpu] nox exit $status; $((SECONDS - begin)) s in all"
exit "$status"
