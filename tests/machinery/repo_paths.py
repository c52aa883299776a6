"""Where things are in the checkout, for the tests and their machinery: the one place that climbs from a file.

tests/ has no __init__.py (verl ships a top-level ``tests`` package): conftest.py puts this folder on ``sys.path``,
so ``from repo_paths import ROOT`` works in every test, in a child pytest (own_process.py), in the framework cells'
environments, and in the scripts of this folder run on their own (``python tests/machinery/...``).
"""

from pathlib import Path

MACHINERY = Path(__file__).resolve().parent  # tests/machinery: helpers, fixtures, stand-ins, cell scripts
TESTS = MACHINERY.parent  # tests/: one folder per room of verl_hadw (tests/README.md)
ROOT = TESTS.parent  # the checkout
FIXTURES = MACHINERY / "fixtures"
