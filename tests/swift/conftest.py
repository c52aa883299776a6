"""The ms-swift environment's fixture: the toy task's assets, built once per session."""

import pytest


@pytest.fixture(scope="session")
def assets(tmp_path_factory):
    from verl_hadw.toy.swift_data import build

    return build(str(tmp_path_factory.mktemp("swift_toy")))


@pytest.fixture(scope="session")
def ranks():
    """CPU ranks of the command-line run (``SWIFT_ENV_RANKS``, default 2)."""
    import os

    return int(os.environ.get("SWIFT_ENV_RANKS", "2"))
