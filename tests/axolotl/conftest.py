"""The Axolotl environment's fixture: the toy task's assets and the documented YAML, built once per session."""

import pytest


@pytest.fixture(scope="session")
def assets(tmp_path_factory):
    from verl_hadw.toy.axolotl_data import build

    return build(str(tmp_path_factory.mktemp("axolotl_toy")))
