"""``HadwTrainerHooks``, the wiring both HF adapters' trainers share, on a stand-in for a framework's ``GRPOTrainer``
(the attributes TRL's and ms-swift's trainers have): the anchor or the options record, the checkpoint callback, the
restore in ``train``, the advantages and the metrics. Each framework's own trainer runs it for real in its folder
(``tests/trl``, ``tests/swift``)."""

import json
import os
import shutil
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch
from field_checks import options_class

from verl_hadw.core.anchor.file_format import STATE_FILE
from verl_hadw.core.errors import ConfigError, PartialCheckpointError
from verl_hadw.hf_trainer.checkpoint_anchor import OptionsRecord, TrainerAnchor
from verl_hadw.hf_trainer.option_fields import KEYWORDS, hf_terms
from verl_hadw.hf_trainer.trainer_hooks import HadwTrainerHooks

TERMS = hf_terms("Stand-in", KEYWORDS, resume_from="train(resume_from_checkpoint=...)", new_experiment="anew")
Options = options_class(TERMS)


class FrameworkTrainer:
    """What the hooks read of a framework's GRPOTrainer, its ``train`` and its checkpoint save: the HF Trainer's files
    in its order (the weights, then ``trainer_state.json``), then the removal of older checkpoints (``save_total_limit``
    1). ``seen`` records what the folder held when the framework's save began."""

    def __init__(self, out, names=("acc",)):
        self.args = SimpleNamespace(output_dir=str(out), should_save=True)
        self.state = SimpleNamespace(global_step=0)
        self.reward_func_names, self.reward_weights = list(names), torch.ones(len(names))
        self.num_generations = self.num_generations_eval = 4
        self._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
        self.trained_from, self.seen = "not trained", None

    def train(self, resume_from_checkpoint=None):
        self.trained_from = resume_from_checkpoint
        return "the framework's train"

    def _get_output_dir(self, trial):
        return self.args.output_dir

    def _save_checkpoint(self, model, trial):
        folder = os.path.join(self.args.output_dir, f"checkpoint-{self.state.global_step}")
        os.makedirs(folder, exist_ok=True)
        self.seen = sorted(os.listdir(folder))
        for name, text in (("model.safetensors", "weights"),
                           ("trainer_state.json", json.dumps({"global_step": self.state.global_step}))):
            with open(os.path.join(folder, name), "w") as f:
                f.write(text)
        for old in os.listdir(self.args.output_dir):
            if old.startswith("checkpoint-") and old != os.path.basename(folder):
                shutil.rmtree(os.path.join(self.args.output_dir, old))


class Trainer(HadwTrainerHooks, FrameworkTrainer):
    def __init__(self, out, options, names=("acc",), excludes_unscorable=True):
        super().__init__(out, names)
        self.excludes_unscorable = excludes_unscorable  # TRL >= 1.6's and Axolotl's; False: TRL 1.0-1.5's, swift's
        self.start_hadw(options)


REWARDS = torch.tensor([[1.0], [0.0], [0.0], [0.0], [1.0], [1.0], [1.0], [0.0]])  # two groups of 4
LENGTHS = torch.full((8,), 3.0)


def test_hadw_keeps_an_anchor_observed_once_per_training_batch(tmp_path):
    t = Trainer(tmp_path, Options(adv_estimator="hadw"))
    assert isinstance(t.hadw_anchor, TrainerAnchor) and t.dgpo_cfg is None
    advantages, values = t.hadw_advantages(REWARDS, LENGTHS, "train")
    assert advantages.shape == (8,) and values["hadw/batch_acc"] == 0.5
    assert t.hadw_anchor.state.open_step == 1  # step = state.global_step + 1
    t.hadw_advantages(REWARDS, LENGTHS, "eval")
    assert t.hadw_anchor.state.calls == [0]  # evaluation previews, never observes
    t.log_hadw_metrics(values, "train")
    assert t._metrics["train"]["hadw/batch_acc"] == [0.5]


def test_dgpo_records_its_options_and_metrics_can_be_switched_off(tmp_path):
    t = Trainer(tmp_path, Options(adv_estimator="dgpo", hadw_log_metrics=False))
    assert t.hadw_anchor is None and isinstance(t._hadw_record, OptionsRecord) and t.dgpo_cfg is not None
    advantages, values = t.hadw_advantages(REWARDS, LENGTHS, "train")
    t.log_hadw_metrics(values, "train")
    assert values and not t._metrics["train"]


def test_train_restores_the_anchor_from_the_checkpoint_the_trainer_resumes_from(tmp_path):
    saved = Trainer(tmp_path, Options(adv_estimator="hadw"))
    saved.hadw_advantages(REWARDS, LENGTHS, "train")
    saved.state.global_step = 1
    folder = tmp_path / "checkpoint-1"
    saved._save_checkpoint(None, None)
    resumed = Trainer(tmp_path, Options(adv_estimator="hadw"))
    assert resumed.train(resume_from_checkpoint=True) == "the framework's train"
    assert resumed.trained_from is True  # handed on as given: the framework finds the folder itself
    assert resumed.hadw_anchor.restored_from == str(folder / "verl_hadw_anchor.json")
    assert resumed.hadw_anchor.state.to_dict() == saved.hadw_anchor.state.to_dict()
    fresh = Trainer(tmp_path, Options(adv_estimator="hadw"))
    fresh.train()
    assert fresh.hadw_anchor.restored_from is None and fresh.trained_from is None


def test_the_reward_functions_are_checked_once_the_framework_has_built_them(tmp_path):
    with pytest.raises(ConfigError, match=r"accuracy_reward_index=1 is out of range: .*\(0: acc\)"):
        Trainer(tmp_path, Options(accuracy_reward_index=1))
    Trainer(tmp_path, Options(accuracy_reward_index=1), names=("acc", "short"))


@pytest.mark.parametrize("weights, index, said", [
    ([0.0], None, r"reward_weights=\[0.0\] weighs a reward function by 0 or less \(0.0 for 'acc'\), and with "
                  "accuracy_reward_index unset"),
    ([1.0, -0.5], None, r"\(-0.5 for 'short'\)"),
    ([0.0, 1.0], 0, r"reward_weights=\[0.0, 1.0\] gives the accuracy reward function 'acc' \(accuracy_reward_index=0\) "
                    "the weight 0.0"),
])
def test_an_accuracy_read_from_a_function_the_advantage_weighs_by_zero_or_less_is_refused(tmp_path, weights, index,
                                                                                        said):
    names = ("acc", "short")[:len(weights)]

    def build(**options):
        trainer = FrameworkTrainer(tmp_path, names)
        trainer.reward_weights = torch.tensor(weights)
        Trainer.start_hadw(trainer, Options(**{"accuracy_reward_index": index, **options}))
        return trainer

    with pytest.raises(ConfigError, match=said):
        build()
    with pytest.raises(ConfigError, match=said):
        build(adv_estimator="dgpo")  # DGPO's question weights read it too
    build(hadw_difficulty_from="reward")  # no accuracy read: the weights are the user's to choose
    build(adv_estimator="dgpo", dgpo_dqw=False)
    if index is not None:
        build(accuracy_reward_index=1)
    assert not list(tmp_path.iterdir())  # nothing written


def test_dgpo_resumed_from_a_checkpoint_that_records_no_method_says_so(tmp_path):
    """HA-DW refuses a checkpoint without an anchor file; DGPO continued from it without a word."""
    folder = tmp_path / "checkpoint-2"
    folder.mkdir()
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 2}))
    t = Trainer(tmp_path, Options(adv_estimator="dgpo"))
    with pytest.warns(UserWarning, match=r"resuming DGPO from .*checkpoint-2, which holds no HA-DW anchor file .*"
                                         r"which method trained it is unknown"):
        assert t.train(resume_from_checkpoint=str(folder)) == "the framework's train"
    assert sorted(p.name for p in folder.iterdir()) == ["trainer_state.json"]  # nothing written


@pytest.mark.parametrize("estimator", ["hadw", "dgpo"])
def test_the_anchor_file_is_in_the_checkpoint_before_the_frameworks_save_begins(tmp_path, estimator):
    """Written after the framework's save, the anchor could be lost (older checkpoints already removed,
    swift's last-checkpoint link already moved). Now the folder holds it when the framework's save begins, and a save
    cut off before the framework's last file leaves a partial checkpoint that a resume refuses naming the newest whole
    one."""
    t = Trainer(tmp_path, Options(adv_estimator=estimator))
    t.hadw_advantages(REWARDS, LENGTHS, "train")
    (tmp_path / "checkpoint-1").mkdir()
    (tmp_path / "checkpoint-1" / f"{STATE_FILE}.tmp.99999").write_text("{")  # a killed save's leftover
    t.state.global_step = 1
    t._save_checkpoint(None, None)
    assert t.seen == [STATE_FILE]  # the anchor first, the dead temporary file gone
    t.state.global_step = 2
    t._save_checkpoint(None, None)
    assert t.seen == [STATE_FILE] and not (tmp_path / "checkpoint-1").exists()
    (tmp_path / "checkpoint-3").mkdir()  # a later save cut off before its trainer_state.json
    (tmp_path / "checkpoint-3" / "model.safetensors").write_text("half")
    resumed = Trainer(tmp_path, Options(adv_estimator=estimator))
    said = rf"cannot resume from {tmp_path}/checkpoint-3: it holds no trainer_state.json.*{tmp_path}/checkpoint-2 is"
    with pytest.raises(PartialCheckpointError, match=said):
        resumed.train(resume_from_checkpoint=True)
    assert resumed.trained_from == "not trained"  # refused before the framework loads anything
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-2", "checkpoint-3"]  # nothing written or moved


def test_a_refused_resume_says_what_it_found(tmp_path):
    """A mistyped checkpoint-20 was "a link whose checkpoint was removed": each refusal now says what is there."""
    from verl_hadw.hf_trainer.checkpoint_anchor import resumed_step
    run = tmp_path / "run"
    t = Trainer(run, Options())
    t.hadw_advantages(REWARDS, LENGTHS, "train")
    t.state.global_step = 2
    t._save_checkpoint(None, None)
    (run / "checkpoint-3").mkdir()
    (run / "last").symlink_to("checkpoint-9")
    (run / "weights").mkdir()
    for name, said in (("checkpoint-20", "it does not exist. the path is mistyped, or the checkpoint was removed"),
                       ("last", "it is a link to 'checkpoint-9', which does not exist. the checkpoint it pointed"),
                       ("checkpoint-3", r"it holds no trainer_state.json. .* \(a partial checkpoint\)"),
                       ("weights", "it holds no trainer_state.json. it is not a Stand-in checkpoint"),
                       ("", "it holds no trainer_state.json. it is a run folder, not a Stand-in checkpoint-N")):
        where = "in" if not name else "beside"
        with pytest.raises(PartialCheckpointError, match=rf"{said}.*{run}/checkpoint-2 is the newest whole "
                                                         rf"checkpoint {where} it") as refused:
            resumed_step(str(run / name), TERMS)
        assert ("link" in str(refused.value)) == (name == "last"), str(refused.value)


# ------------------------------------------------------------------------------------------------ unscorable
NAN = float("nan")
UNSCORED = torch.tensor([[1.0], [0.0], [NAN], [0.0], [NAN], [NAN], [NAN], [NAN],  # 3 scored; none scored
                         [1.0], [NAN], [NAN], [NAN], [1.0], [1.0], [0.0], [1.0]])  # 1 scored; all scored
OUT = [2, *range(4, 12)]  # the rows without signal: unscored, a group without a scored row, one with a single one
SWITCHED_OFF = {"adv_estimator": "dgpo", "dgpo_dgae": False, "dgpo_dqw": False, "dgpo_valid_token_norm": False,
                "dgpo_epsilon": 1e-4}


def trls_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """TRL 1.6-1.16's GRPO advantage (scale_rewards="group"), its operations: unscorable rows NaN, nanmean and
    nanstd per group, NaN to 0."""
    r = rewards.nansum(dim=1)
    r[torch.isnan(rewards).all(dim=1)] = NAN
    groups = r.view(-1, 4)
    mean = torch.nanmean(groups, dim=1, keepdim=True)
    count = torch.sum(~torch.isnan(groups), dim=1, keepdim=True)
    variance = torch.nanmean((groups - mean) ** 2, dim=1, keepdim=True)
    variance *= torch.where(count > 1, count / (count - 1), torch.full_like(count / 1, NAN))
    std = torch.sqrt(variance).repeat_interleave(4)
    return torch.nan_to_num((r - mean.repeat_interleave(4)) / (std + 1e-4), nan=0.0)


def test_an_unscorable_completion_gets_trls_advantage_0_outside_its_groups_statistics(tmp_path):
    advantages, _ = Trainer(tmp_path, Options(**SWITCHED_OFF)).hadw_advantages(UNSCORED, LENGTHS.repeat(2))
    assert torch.equal(advantages, trls_advantages(UNSCORED))  # TRL's GRPO, bit for bit
    assert advantages[OUT].eq(0).all() and advantages[[0, 1, 3, 12, 14]].ne(0).all()


def test_hadws_batch_accuracy_and_anchor_and_dgpos_tokens_read_only_the_scored_completions(tmp_path):
    t = Trainer(tmp_path, Options(adv_estimator="hadw"))
    advantages, values = t.hadw_advantages(UNSCORED, LENGTHS.repeat(2))
    assert values["hadw/batch_acc"] == 5 / 8 and (t.hadw_anchor.state.correct, t.hadw_anchor.state.count) == (5, 8)
    assert advantages[OUT].eq(0).all() and (advantages[[0, 12]] > 0).all() and (advantages[[1, 3, 14]] < 0).all()
    lengths = torch.arange(1.0, 17.0)
    dgpo = Trainer(tmp_path, Options(adv_estimator="dgpo"))
    _, values = dgpo.hadw_advantages(UNSCORED, lengths)
    valid = 1 + 2 + 4 + 13 + 14 + 15 + 16  # the scored rows of the two groups with signal; TRL's loss: all 136 tokens
    assert values["dgpo/valid_token_ratio"] == valid / 136 and values["dgpo/valid_groups"] == 2


@pytest.mark.parametrize("estimator", ["hadw", "dgpo"])
def test_where_the_framework_sums_an_unscorable_completions_rewards_to_0_so_does_the_method(tmp_path, estimator):
    """TRL 1.0-1.5 and ms-swift: nansum's 0, in its group's statistics and HA-DW's batch accuracy."""
    mine = Trainer(tmp_path, Options(adv_estimator=estimator), excludes_unscorable=False)
    zeros = Trainer(tmp_path, Options(adv_estimator=estimator), excludes_unscorable=False)
    advantages, values = mine.hadw_advantages(UNSCORED, LENGTHS.repeat(2))
    assert torch.equal(advantages, zeros.hadw_advantages(UNSCORED.nan_to_num(0.0), LENGTHS.repeat(2))[0])
    assert advantages.ne(0).any() and values.get("hadw/batch_acc", 5 / 16) == 5 / 16


@pytest.mark.parametrize("excludes", [True, False], ids=["excluded", "zero"])
def test_a_batch_without_a_scored_completion_carries_no_signal(tmp_path, excludes):
    t = Trainer(tmp_path, Options(adv_estimator="hadw"), excludes_unscorable=excludes)
    advantages, values = t.hadw_advantages(torch.full((8, 1), NAN), LENGTHS)
    assert torch.equal(advantages, torch.zeros(8))
    assert (values, t.hadw_anchor.state.count) == ({}, 0) if excludes else values["hadw/batch_acc"] == 0.0


@pytest.mark.parametrize("excludes", [True, False], ids=["excluded", "zero"])
def test_a_none_from_the_accuracy_function_is_a_0_as_in_the_frameworks_sum(tmp_path, excludes):
    rewards = torch.tensor([[NAN, 0.5], [1.0, 0.5], [0.0, 0.5], [1.0, 0.5]] * 2)
    options = Options(adv_estimator="hadw", accuracy_reward_index=0)
    t, zeros = (Trainer(tmp_path, options, ("acc", "style"), excludes) for _ in range(2))
    advantages, values = t.hadw_advantages(rewards, LENGTHS)
    assert values["hadw/batch_acc"] == 0.5 and t.hadw_anchor.state.count == 8
    assert torch.equal(advantages, zeros.hadw_advantages(rewards.nan_to_num(0.0), LENGTHS)[0])
