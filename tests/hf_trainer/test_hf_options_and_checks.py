"""What the HF-Trainer-based adapters share, without their frameworks: the words (``hf_terms``), the options read
back (``OptionFields``, ``check_accuracy_index``), the loss-type check (``LossTypes``) and the version read. Runs in
the main environment and in every HF framework's environment (transformers only)."""

import pytest
from field_checks import loss_types_table, options_class
from transformers import HfArgumentParser

from verl_hadw.core.errors import ConfigError
from verl_hadw.hf_trainer.checks import GLOBAL_TOKENS, SEQUENCE_MEANS, LossTypes, in_range, installed
from verl_hadw.hf_trainer.option_fields import FLAGS, KEYWORDS, YAML, check_accuracy_index, hf_terms

CONFIG = hf_terms("Cfg", KEYWORDS, resume_from="train(resume_from_checkpoint=<its folder>)", new_experiment="anew")
COMMAND = hf_terms("Cmd", FLAGS, resume_from="--resume_from_checkpoint <its folder>", new_experiment="anew")
NESTED = {"scale_rewards": "trl.scale_rewards", "reward_weights": "trl.reward_weights"}  # Axolotl's trl: section
FILE = hf_terms("Yml", YAML, resume_from="resume_from_checkpoint: <its folder>", new_experiment="anew", names=NESTED)


@pytest.mark.parametrize("terms, expected", [
    (CONFIG, ["hadw_anchor_eta", "hadw_anchor_eta=8.0", "scale_rewards='none'", "hadw_base=dgpo",
              "reward_weights=[1.0, 0.5]", "set hadw_allow_missing_state=True to continue with a fresh anchor",
              "other hadw_anchor_* values", "resume from another checkpoint (train(resume_from_checkpoint=<its "
              "folder>))"]),
    (COMMAND, ["--hadw_anchor_eta", "--hadw_anchor_eta 8.0", "--scale_rewards none", "--hadw_base dgpo",
               "--reward_weights 1.0 0.5", "add --hadw_allow_missing_state true to continue with a fresh anchor",
               "other --hadw_anchor_* values", "resume from another checkpoint (--resume_from_checkpoint <its "
               "folder>)"]),
    (FILE, ["hadw_anchor_eta", "hadw_anchor_eta: 8.0", "trl.scale_rewards: none", "hadw_base: dgpo",
            "trl.reward_weights: [1.0, 0.5]", "set hadw_allow_missing_state: true to continue with a fresh anchor",
            "other hadw_anchor_* values", "resume from another checkpoint (resume_from_checkpoint: <its folder>)"]),
])
def test_the_words_are_the_frameworks_fields_or_flags(terms, expected):
    said = [terms.key("hadw.anchor.eta"), terms.setting("hadw.anchor.eta", 8.0),
            terms.setting("norm_adv_by_std_in_grpo", False), terms.setting("hadw.base", "dgpo"),
            terms.setting("reward_weights", [1.0, 0.5]), terms.allow_missing_state, terms.anchor_tuning,
            terms.resume_elsewhere]
    assert said == expected


def test_options_given_as_text_are_read_back_through_the_cores_parser():
    (ours,) = HfArgumentParser([options_class(COMMAND)]).parse_args_into_dataclasses(
        ["--adv_estimator", "dgpo", "--accuracy_reward_index", "1", "--hadw_lambda_scale", "1.5",
         "--hadw_anchor_init", "0.3"])
    ours.check_adapter_fields()
    assert (ours.adv_estimator, ours.accuracy_reward_index, ours.hadw_options().lambda_scale) == ("dgpo", 1, 1.5)
    assert ours.hadw_options().anchor.init == 0.3 and ours.algorithm_node()["hadw"]["anchor"]["init"] == 0.3
    ours.hadw_anchor_init = "first"
    with pytest.raises(ConfigError, match="--hadw_anchor_init='first' is not valid"):
        ours.check_adapter_fields()


def test_an_accuracy_index_past_the_reward_functions_is_refused_naming_them():
    check_accuracy_index(1, ["acc", "short"], COMMAND)
    check_accuracy_index(None, ["acc"], COMMAND)
    with pytest.raises(ConfigError, match=r"^--accuracy_reward_index 2 is out of range: there are 2 reward "
                                          r"function\(s\) \(0: acc, 1: short\); valid: 0..1, or leave it unset.$"):
        check_accuracy_index(2, ["acc", "short"], COMMAND)


LOSSES = {"dapo": (True, GLOBAL_TOKENS), "cispo": (True, GLOBAL_TOKENS), "grpo": (False, SEQUENCE_MEANS)}


@pytest.mark.parametrize("spelling, said", [
    (KEYWORDS, ["loss_type='bogus' is not one verl-hadw has checked", "Use loss_type='dapo', or set "
              "dgpo_valid_token_norm=False", "loss_type='grpo' averages each completion", "Use loss_type='dapo' or "
              "loss_type='cispo'", "steps_per_generation=4 with gradient_accumulation_steps=2: an optimizer step then "
              "sees part of one generation batch", "Leave steps_per_generation unset"]),
    (FLAGS, ["--loss_type bogus is not one verl-hadw has checked", "Use --loss_type dapo, or set "
             "--dgpo_valid_token_norm false", "--loss_type grpo averages each completion", "Use --loss_type dapo or "
             "--loss_type cispo", "--steps_per_generation 4 with --gradient_accumulation_steps 2: an optimizer step "
             "then sees part of one generation batch", "Leave --steps_per_generation unset"]),
    (YAML, ["trl.loss_type: bogus is not one verl-hadw has checked", "Use trl.loss_type: dapo, or set "
            "dgpo_valid_token_norm: false", "Use trl.loss_type: dapo or trl.loss_type: cispo",
            "steps_per_generation: 4 with gradient_accumulation_steps: 2"]),
])
def test_a_loss_type_under_which_valid_token_averaging_is_not_exact_is_refused_in_the_frameworks_words(spelling, said):
    losses = LossTypes(LOSSES, spelling, {"loss_type": "trl.loss_type"} if spelling == YAML else {})
    messages = []
    for args in (("bogus", None, 1), ("grpo", None, 1), ("dapo", 4, 2)):
        with pytest.raises(ConfigError) as refused:
            losses.check(*args)
        messages.append(str(refused.value))
    assert all(any(part in m for m in messages) for part in said), messages
    losses.check("dapo", None, 2)  # steps_per_generation unset: it defaults to gradient_accumulation_steps
    losses.check("cispo", 2, 2)
    table = loss_types_table(losses).splitlines()
    assert table[4].startswith("| `grpo` | **refused** |") and "exact (with `" in table[2]


def test_the_installed_release_is_read_from_its_metadata_and_a_missing_one_names_the_install():
    assert installed("packaging", "trl") and in_range(installed("packaging", "trl"), ">=1")
    with pytest.raises(ModuleNotFoundError, match=r'needs no-such-dist: pip install "verl-hadw\[swift\]"'):
        installed("no-such-dist", "swift")
    assert in_range("1.2.0rc1", ">=1.0,<2") and not in_range("2.0.0", ">=1.0,<2") and not in_range("main", ">=1")
