"""One verl estimator call parses its options once; later calls of the same configuration parse and check nothing.

The near-miss checks (difflib over every key) and the unused-option warnings run once per configuration, not on
every step (``run_options.read_call``). Each call reads verl's node once (one resolve, one look-up of the trainer
node) and hands that read down: nothing after it resolves the node again."""

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from verl_hadw.core import options as core_options
from verl_hadw.verl.config import checks as config_check
from verl_hadw.verl.config import run_options
from verl_hadw.verl.estimators import compute_dgpo_outcome_advantage, compute_hadw_outcome_advantage
from verl_hadw.verl.process_state import reset


@pytest.fixture
def counted(monkeypatch):
    """Counts: parses of a configuration, sections parsed, near-miss checks."""
    counts = {"parse_run": 0, "parse_section": 0, "check_sections": 0}

    def counting(name, module):
        original = getattr(module, name)

        def wrapper(*args, **kwargs):
            counts[name] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    counting("parse_run", run_options)  # read_call's parse of a configuration
    counting("parse_section", core_options)  # the core's parser, one section at a time
    counting("check_sections", config_check)
    reset()
    yield counts
    reset()


def batch():
    rewards = torch.zeros(8, 3)
    rewards[:, -1] = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0])
    uid = np.array([f"p{i // 4}" for i in range(8)], dtype=object)
    return rewards, torch.ones(8, 3, dtype=torch.long), uid


@pytest.mark.parametrize("estimator, node", [
    (compute_hadw_outcome_advantage, {"adv_estimator": "hadw", "hadw": {"state_key": "parse-once"}}),
    (compute_hadw_outcome_advantage, {"adv_estimator": "hadw", "hadw": {"state_key": "p", "base": "dgpo"}}),
    (compute_dgpo_outcome_advantage, {"adv_estimator": "dgpo", "dgpo": {"temperature": 1.0}}),
])
def test_one_call_parses_the_options_once(counted, estimator, node):
    config = OmegaConf.create(node)
    estimator(*batch(), config=config)
    # one parse: both sections once each (hadw, dgpo), the near-miss checks once
    assert counted == {"parse_run": 1, "parse_section": 2, "check_sections": 1}
    for _ in range(3):
        estimator(*batch(), config=config)
    assert counted == {"parse_run": 1, "parse_section": 2, "check_sections": 1}  # nothing again


def test_another_configuration_is_parsed_and_checked_once_too(counted):
    first = OmegaConf.create({"adv_estimator": "hadw", "hadw": {"state_key": "a"}})
    compute_hadw_outcome_advantage(*batch(), config=first)
    changed = OmegaConf.create({"adv_estimator": "hadw", "hadw": {"state_key": "b", "lambda_scale": 1.5}})
    compute_hadw_outcome_advantage(*batch(), config=changed)
    compute_hadw_outcome_advantage(*batch(), config=changed)
    assert counted == {"parse_run": 2, "parse_section": 4, "check_sections": 2}


def test_a_bad_option_still_stops_every_call(counted):
    """A configuration that failed its parse is not remembered: each call raises, naming the key."""
    config = OmegaConf.create({"adv_estimator": "hadw", "hadw": {"lamda_scale": 1.5}})
    for _ in range(2):
        with pytest.raises(core_options.ConfigError, match="Did you mean 'algorithm.hadw.lambda_scale'"):
            compute_hadw_outcome_advantage(*batch(), config=config)
    assert counted["parse_run"] == 2


def test_the_parsed_options_are_the_ones_handed_down():
    reset()
    config = OmegaConf.create({"adv_estimator": "hadw", "hadw": {"state_key": "k", "lambda_scale": 1.5}})
    run = run_options.read_call(config).run
    assert run == run_options.parse_run(config) and run.hadw.lambda_scale == 1.5
    assert run_options.read_call(config).run is run
    reset()


@pytest.mark.parametrize("estimator, algorithm", [
    (compute_hadw_outcome_advantage, {"adv_estimator": "hadw", "hadw": {"state_key": "read-once"}}),
    (compute_dgpo_outcome_advantage, {"adv_estimator": "dgpo"}),
])
def test_each_call_reads_verls_node_once(monkeypatch, tmp_path, estimator, algorithm):
    """One resolve of the ``algorithm`` node and one look-up of the ``trainer`` node per call, the first call (which
    parses, checks and builds the anchor's back-end from that read) included; verl's trainer step is set, as in a
    trainer, so the legacy back-end and the estimator record read the trainer node too."""
    from verl.utils.skip.skip_manager import SkipManager

    trainer = {"use_v1": False, "save_freq": 1, "default_local_dir": str(tmp_path), "resume_mode": "disable"}
    root = OmegaConf.create({"algorithm": algorithm, "trainer": trainer})
    reads = {"to_container": 0, "select": 0}
    for name in reads:
        original = getattr(OmegaConf, name)

        def wrapper(*args, _name=name, _original=original, **kwargs):
            reads[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(OmegaConf, name, staticmethod(wrapper))
    reset()
    try:
        for step in (1, 2, 3):
            SkipManager.set_step(step)
            estimator(*batch(), config=root.algorithm)
            assert reads == {"to_container": step, "select": step}, f"call {step}"
    finally:
        reset()
