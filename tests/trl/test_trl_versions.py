"""The TRL releases the adapter supports: ``TRL_RANGE`` (the ``[trl]`` extra's bound), refused outside it at
construction of ``HadwGRPOConfig`` and ``HadwGRPOTrainer`` with a message naming the installed TRL and the range.

Outside the range is faked here by the version string only (``trl.checks.installed_trl``): the installed TRL's code
stays what it is. docs/trl.md ("Supported TRL releases") shows the same refusal under a real TRL 0.29.1.
"""

from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet
from trl_helpers import accuracy, config, toy_dataset

import verl_hadw
from verl_hadw.core.errors import ConfigError
from verl_hadw.trl import HadwGRPOTrainer
from verl_hadw.trl import checks as trl_version


def fake_trl(monkeypatch, installed: str) -> None:
    monkeypatch.setattr(trl_version, "installed_trl", lambda: installed)


def test_the_installed_trl_is_in_the_range():
    assert trl_version.installed_trl() in SpecifierSet(verl_hadw.TRL_RANGE, prereleases=True)
    assert verl_hadw.TRL_RANGE == ">=1.0.0,!=1.15.*,<1.17"


@pytest.mark.parametrize("installed", ["0.29.1", "1.15.0", "1.17.0", "2.0.0", "0.0.1"])
def test_a_trl_outside_the_range_is_refused_at_the_config(tmp_path, monkeypatch, installed):
    fake_trl(monkeypatch, installed)
    with pytest.raises(ConfigError) as info:
        config(tmp_path)
    message = str(info.value)
    assert f"installed TRL is {installed}" in message and verl_hadw.TRL_RANGE in message
    assert f'pip install "trl{verl_hadw.TRL_RANGE}"' in message


def test_a_trl_outside_the_range_is_refused_at_the_trainer(tmp_path, monkeypatch):
    args = config(tmp_path)  # built under the real TRL
    fake_trl(monkeypatch, "0.29.1")
    said = r"HadwGRPOTrainer supports TRL >=1\.0\.0,!=1\.15\.\*,<1\.17; the installed TRL is 0\.29\.1"
    with pytest.raises(ConfigError, match=said):
        HadwGRPOTrainer(model="unused", reward_funcs=accuracy, args=args, train_dataset=toy_dataset(4))


@pytest.mark.parametrize("installed", ["1.0.0", "1.9.0.dev0", "1.14.2", "1.16.0"])
def test_releases_inside_the_range_are_accepted(tmp_path, monkeypatch, installed):
    fake_trl(monkeypatch, installed)
    config(tmp_path)


@pytest.mark.parametrize("installed, refused", [("1.0.0", True), ("1.8.0", True), ("1.9.0", False), ("1.16.0", False)])
def test_dgpo_valid_token_averaging_with_masked_truncations_needs_trl_1_9(tmp_path, monkeypatch, installed, refused):
    """Before TRL 1.9.0 dapo's normaliser counts truncated completions' tokens, masked or not."""
    fake_trl(monkeypatch, installed)
    if refused:
        with pytest.raises(ConfigError, match=rf"TRL {installed} divides the dapo/cispo/vespo loss by every"):
            config(tmp_path, adv_estimator="dgpo", mask_truncated_completions=True)
    else:
        config(tmp_path, adv_estimator="dgpo", mask_truncated_completions=True)
    # without the masking, or without valid-token averaging, or HA-DW over GRPO: every 1.x
    config(tmp_path, adv_estimator="dgpo", mask_truncated_completions=False)
    config(tmp_path, adv_estimator="dgpo", dgpo_valid_token_norm=False, mask_truncated_completions=True)
    config(tmp_path, adv_estimator="hadw", mask_truncated_completions=True)
