#!/usr/bin/env bash
# Install (if needed) and run the whole test suite on CPU. This is what CI runs (.ci/run).
# Arguments go to pytest (without any, it runs tests/). Every step can fail the run: tests/project/test_ci_steps.py plants
# the fault each one exists to catch. The docs build (mkdocs --strict) is a test: tests/project/test_docs_build.py.
set -euo pipefail
cd "$(dirname "$0")/.."
begin=$SECONDS
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }  # jiffies the machine's CPUs spent busy (all of them)
busy0=$(busy)
bash scripts/install_cpu.sh
venv=${VERL_HADW_VENV:-.venv}
source scripts/bytecode.sh  # .pyc on first import, under the venv
export WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false HF_HUB_DISABLE_TELEMETRY=1  # no daemon thread phoning the Hub
export PYTHONFAULTHANDLER=1  # a crash (even at interpreter exit) prints every thread's Python stack
"$venv/bin/ruff" check .  # lint (pyproject.toml: line length 120, import order); ruff comes from the test extra
"$venv/bin/python" -m verl_hadw.cli doctor  # verl sees the estimators (the checkout's own package)
status=0
"$venv/bin/python" -m pytest -q -p no:cacheprovider --durations=25 "$@" || status=$?  # the 25 slowest: CI time
echo "[test_cpu] pytest exit $status; $((SECONDS - begin)) s in all (install, lint, doctor, tests)," \
  "$(( ($(busy) - busy0) / $(getconf CLK_TCK) )) core-s busy on $(nproc) CPUs"
exit "$status"
