"""verl 0.9.1 beside TRL 1.x (the ``[trl]`` extra): verl's FSDP workers import a class TRL removed.

The end-to-end launches (tests/helpers/launches.py) run in the CI environment, which holds the ``[trl]`` extra: they
train only because ``verl_hadw.cpu``'s patch tells verl's ``apply_monkey_patch`` that such a TRL is absent.
"""

import importlib.util

import pytest

from verl_hadw.verl import support


def test_the_installed_trl_lacks_what_verl_imports_and_doctor_says_so():
    from importlib.metadata import version

    assert int(version("trl").split(".")[0]) >= 1
    assert not support.trl_has_value_head()
    assert "AutoModelForCausalLMWithValueHead" in support.verl_trl_clash()


def test_verl_fails_without_the_patch_and_starts_with_it():
    """Without the patch verl's own check says TRL is there (and its worker would import the missing class)."""
    import verl.models.transformers.monkey_patch as monkey_patch
    from verl.utils.import_utils import is_trl_available

    from verl_hadw.cpu import patches

    assert is_trl_available()  # verl's check: TRL is importable
    with pytest.raises(ImportError, match="AutoModelForCausalLMWithValueHead"):
        from trl import AutoModelForCausalLMWithValueHead  # noqa: F401  (what verl's worker does next)
    before = monkey_patch.is_trl_available
    try:
        patches._trl_without_value_head(monkey_patch)
        assert monkey_patch.is_trl_available() is False
    finally:
        monkey_patch.is_trl_available = before


def test_no_trl_no_clash(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "trl" else real(name, *a))
    assert not support.trl_has_value_head()
