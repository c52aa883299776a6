"""What the HF-Trainer-based adapters share, without their frameworks: the words (``Spelling``, ``hf_terms``), the
adapter's own fields (``add_adapter_fields``, ``check_accuracy_index``), the loss-type check (``LossTypes``) and the
version read (``versions``). Runs in the main environment and in every HF framework's environment (transformers
only)."""

import dataclasses
from dataclasses import dataclass

import pytest
from transformers import HfArgumentParser

from verl_hadw.core.errors import ConfigError
from verl_hadw.core.option_fields import OptionFields, declared_fields
from verl_hadw.hf_trainer.adapter_fields import add_adapter_fields, check_accuracy_index
from verl_hadw.hf_trainer.loss_types import GLOBAL_TOKENS, SEQUENCE_MEANS, LossTypes
from verl_hadw.hf_trainer.versions import in_range, installed
from verl_hadw.hf_trainer.words import Spelling, hf_terms

FIELDS, FLAGS = Spelling(flags=False), Spelling(flags=True)
CONFIG = hf_terms("Cfg", FIELDS, resume_from="train(resume_from_checkpoint=<its folder>)", new_experiment="anew")
COMMAND = hf_terms("Cmd", FLAGS, resume_from="--resume_from_checkpoint <its folder>", new_experiment="anew")


@pytest.mark.parametrize("terms, expected", [
    (CONFIG, ["hadw_anchor_eta", "hadw_anchor_eta=8.0", "scale_rewards='none'", "hadw_base=dgpo",
              "reward_weights=[1.0, 0.5]", "set hadw_allow_missing_state=True to continue with a fresh anchor",
              "other hadw_anchor_* values", "resume from another checkpoint (train(resume_from_checkpoint=<its "
              "folder>))"]),
    (COMMAND, ["--hadw_anchor_eta", "--hadw_anchor_eta 8.0", "--scale_rewards none", "--hadw_base dgpo",
               "--reward_weights 1.0 0.5", "add --hadw_allow_missing_state true to continue with a fresh anchor",
               "other --hadw_anchor_* values", "resume from another checkpoint (--resume_from_checkpoint <its "
               "folder>)"]),
])
def test_the_words_are_the_frameworks_fields_or_flags(terms, expected):
    said = [terms.key("hadw.anchor.eta"), terms.setting("hadw.anchor.eta", 8.0),
            terms.setting("norm_adv_by_std_in_grpo", False), terms.setting("hadw.base", "dgpo"),
            terms.setting("reward_weights", [1.0, 0.5]), terms.allow_missing_state, terms.anchor_tuning,
            terms.resume_elsewhere]
    assert said == expected


@dataclass
@add_adapter_fields
class CommandOptions(OptionFields):
    terms = COMMAND
    scale_rewards = "group"


def test_the_adapters_fields_come_first_spelled_in_its_words_then_every_declared_option():
    names = [f.name for f in dataclasses.fields(CommandOptions)]
    assert names == ["adv_estimator", "accuracy_reward_index", *declared_fields()]
    helps = {f.name: f.metadata["help"] for f in dataclasses.fields(CommandOptions)}
    assert "--hadw_base dgpo: HA-DW over DGPO" in helps["adv_estimator"]
    assert "which of --reward_funcs is the accuracy" in helps["accuracy_reward_index"]
    (ours,) = HfArgumentParser([CommandOptions]).parse_args_into_dataclasses(
        ["--adv_estimator", "dgpo", "--accuracy_reward_index", "1", "--hadw_lambda_scale", "1.5"])
    ours.check_adapter_fields()
    assert (ours.adv_estimator, ours.accuracy_reward_index, ours.hadw_options().lambda_scale) == ("dgpo", 1, 1.5)


def test_an_accuracy_index_past_the_reward_functions_is_refused_naming_them():
    check_accuracy_index(1, ["acc", "short"], COMMAND)
    check_accuracy_index(None, ["acc"], COMMAND)
    with pytest.raises(ConfigError, match=r"^--accuracy_reward_index 2 is out of range: there are 2 reward "
                                          r"function\(s\) \(0: acc, 1: short\); valid: 0..1, or leave it unset.$"):
        check_accuracy_index(2, ["acc", "short"], COMMAND)


LOSSES = {"dapo": (True, GLOBAL_TOKENS), "cispo": (True, GLOBAL_TOKENS), "grpo": (False, SEQUENCE_MEANS)}


@pytest.mark.parametrize("spelling, said", [
    (FIELDS, ["loss_type='bogus' is not one verl-hadw has checked", "use loss_type='dapo', or set "
              "dgpo_valid_token_norm=False", "loss_type='grpo' averages each completion", "Use loss_type='dapo' or "
              "loss_type='cispo'", "steps_per_generation=4 with gradient_accumulation_steps=2: an optimizer step then "
              "sees part of one generation batch", "Leave steps_per_generation unset"]),
    (FLAGS, ["--loss_type bogus is not one verl-hadw has checked", "use --loss_type dapo, or set "
             "--dgpo_valid_token_norm false", "--loss_type grpo averages each completion", "Use --loss_type dapo or "
             "--loss_type cispo", "--steps_per_generation 4 with --gradient_accumulation_steps 2: an optimizer step "
             "then sees part of one generation batch", "Leave --steps_per_generation unset"]),
])
def test_a_loss_type_under_which_valid_token_averaging_is_not_exact_is_refused_in_the_frameworks_words(spelling, said):
    losses = LossTypes(LOSSES, spelling)
    messages = []
    for args in (("bogus", None, 1), ("grpo", None, 1), ("dapo", 4, 2)):
        with pytest.raises(ConfigError) as refused:
            losses.check(*args)
        messages.append(str(refused.value))
    assert all(any(part in m for m in messages) for part in said), messages
    losses.check("dapo", None, 2)  # steps_per_generation unset: it defaults to gradient_accumulation_steps
    losses.check("cispo", 2, 2)
    table = losses.table_markdown().splitlines()
    assert table[0] == f"| `{spelling.name('loss_type')}` | valid-token averaging | why |" and len(table) == 2 + 3
    assert table[4].startswith("| `grpo` | **refused** |") and "exact (with `" in table[2]


def test_the_installed_release_is_read_from_its_metadata_and_a_missing_one_names_the_install():
    assert installed("packaging", "trl") and in_range(installed("packaging", "trl"), ">=1")
    with pytest.raises(ModuleNotFoundError, match=r'needs no-such-dist: pip install "verl-hadw\[swift\]"'):
        installed("no-such-dist", "swift")
    assert in_range("1.2.0rc1", ">=1.0,<2") and not in_range("2.0.0", ">=1.0,<2") and not in_range("main", ">=1")
