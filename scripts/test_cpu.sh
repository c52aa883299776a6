#!/usr/bin/env bash
# Install (if needed) and run the whole test suite on CPU. This is what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install_cpu.sh
venv=${VERL_HADW_VENV:-.venv}
export WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false
"$venv/bin/ruff" check .  # lint (pyproject.toml: line length 120, import order); ruff comes from the test extra
site=$(mktemp -d)  # the docs (mkdocs.yml): a broken link, a missing page or a page left out of the nav fails the build
"$venv/bin/mkdocs" build --strict --quiet --site-dir "$site"
rm -rf "$site"
"$venv/bin/verl-hadw" doctor
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider --durations=25 tests "$@"  # the 25 slowest: CI time
