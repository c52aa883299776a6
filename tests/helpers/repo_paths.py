"""Where things are in the checkout, for the tests and their helpers: the one place that climbs from a file.

tests/ has no __init__.py (verl ships a top-level ``tests`` package): conftest.py puts this folder on ``sys.path``,
so ``from repo_paths import ROOT`` works in every test, in every xdist worker, in the framework environments, and in
the scripts of this folder run on their own (``python tests/helpers/...``).
"""

from pathlib import Path

HELPERS = Path(__file__).resolve().parent  # tests/helpers: helpers, fixtures, stand-ins, environment scripts
TESTS = HELPERS.parent  # tests/: one folder per package of verl_hadw (tests/README.md)
ROOT = TESTS.parent  # the checkout
FIXTURES = HELPERS / "fixtures"
