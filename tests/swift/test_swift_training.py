"""HA-DW and DGPO through ms-swift's own GRPO pipeline on CPU (the toy task, a tiny local model): they train, their
metrics land in swift's log, a resumed run equals the uninterrupted one bit for bit, and with every method switch
off the adapter is swift's GRPO, bit for bit."""

import json

import pytest
from swift_runs import command_line, failure, keep, logged_steps, records, toy_arguments, train

from verl_hadw.core.anchor.file_format import STATE_FILE
from verl_hadw.toy.task import compute_score


def holds_what_swift_holds(calls: list[dict]) -> None:
    """Each call's inputs are swift's own: the rewards are the toy scorer's of swift's completions, and the loss tokens
    the adapter read are those of swift's masks, which sum to swift's num_items_in_batch (what its token-mean losses
    divide by; a +1 planted in every row of the adapter's count passed every test)."""
    for call in calls:
        assert call["rewards"] == [[compute_score("toy", c, s)] for c, s in zip(call["completions"], call["solutions"],
                                                                                 strict=True)]
        assert call["lengths"] == call["mask_tokens"] and len(set(call["num_items_in_batch"])) == 1
        assert sum(call["mask_tokens"]) == call["num_items_in_batch"][0]


def test_resume_from_step_2_continues_the_uninterrupted_run_bit_for_bit(assets, tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train(toy_arguments(assets, straight, steps=4, save_steps=2), straight / "records")
    argv = toy_arguments(assets, resumed, steps=4, save_steps=2,
                         resume_from_checkpoint=str(straight / "checkpoint-2"))
    train(argv, resumed / "records")
    whole, second = records(straight / "records"), records(resumed / "records")
    holds_what_swift_holds(whole)
    assert [r["step"] for r in whole] == [1, 2, 3, 4] and [r["step"] for r in second] == [3, 4]
    for a, b in zip(whole[2:], second):  # steps 3-4: the same rewards, advantages and anchor, bit for bit
        assert a == b
    saved = json.loads((straight / "checkpoint-4" / STATE_FILE).read_text())
    assert saved == json.loads((resumed / "checkpoint-4" / STATE_FILE).read_text())
    assert saved["state"]["committed_steps"] == 3  # steps 1-3 committed; step 4 open
    assert logged_steps(straight)[2:] == logged_steps(resumed)
    keep("hadw", straight / "records")


@pytest.mark.parametrize("flags", [["--adv_estimator", "dgpo"], ["--adv_estimator", "hadw", "--hadw_base", "dgpo"]],
                         ids=["dgpo", "hadw_over_dgpo"])
def test_dgpo_and_hadw_over_dgpo_train_and_log_their_metrics(assets, tmp_path, flags):
    """Under swift's dapo loss (its grpo default averages per completion: refused with valid-token averaging)."""
    train(toy_arguments(assets, tmp_path, steps=2, save_steps=2, loss_type="dapo") + flags, tmp_path / "records")
    steps = logged_steps(tmp_path)
    assert len(steps) == 2 and all("dgpo/valid_groups" in s and "dgpo/valid_token_ratio" in s for s in steps)
    assert all(("hadw/anchor_prior" in s) == ("hadw" in flags) for s in steps)
    calls = records(tmp_path / "records")
    assert [c["step"] for c in calls] == [1, 2] and any(any(a != 0 for a in c["advantages"]) for c in calls)
    holds_what_swift_holds(calls)
    saved = json.loads((tmp_path / "checkpoint-2" / STATE_FILE).read_text())
    assert saved["options"]["algorithm.adv_estimator"] == flags[1]
    assert (saved["state"] is None) == (flags[1] == "dgpo")
    keep("dgpo" if flags[1] == "dgpo" else "hadw_over_dgpo", tmp_path / "records")


SWITCHED_OFF = ["--adv_estimator", "dgpo", "--dgpo_dgae", "false", "--dgpo_dqw", "false",
                "--dgpo_valid_token_norm", "false", "--dgpo_epsilon", "1e-4"]


@pytest.mark.parametrize("loss_type", ["dapo", "grpo", "bnpo", "dr_grpo"])
def test_switched_off_it_is_swifts_grpo_bit_for_bit(assets, tmp_path, loss_type):
    """DGPO without DGAE, DQW and valid-token averaging, with swift's epsilon (1e-4), logs the losses of the same run
    under swift's own ``swift rlhf`` bit for bit."""
    swifts, ours = tmp_path / "swifts", tmp_path / "ours"
    train(toy_arguments(assets, swifts, steps=3, save_steps=10, loss_type=loss_type), swifts / "records",
          swifts_own=True)
    train(toy_arguments(assets, ours, steps=3, save_steps=10, loss_type=loss_type) + SWITCHED_OFF, ours / "records")
    theirs, mine = logged_steps(swifts), logged_steps(ours)
    assert len(theirs) == 3 and any(s["loss"] != 0 for s in theirs)
    assert [{k: v for k, v in s.items() if not k.startswith("dgpo/")} for s in mine] == theirs


UNSCORED_PLUGIN = """from swift.rewards import ORM, orms

from verl_hadw.toy.task import compute_score

NONE_AT = [set(), {1, 5, 6, 7}, {0, 1, 4, 5, 6, 7}, set(range(8))]


class PartlyUnscored(ORM):
    def __call__(self, completions, solution, trainer_state, **kwargs):
        none_at = NONE_AT[trainer_state.global_step % 4]
        return [None if i in none_at else compute_score("toy", c, s)
                for i, (c, s) in enumerate(zip(completions, solution))]


orms["toy_partly_unscored"] = PartlyUnscored
"""


@pytest.mark.parametrize("loss_type", ["dapo"])
def test_switched_off_it_is_swifts_grpo_bit_for_bit_where_completions_are_unscored(assets, tmp_path, loss_type):
    """The toy accuracy, None at chosen rows of each generation batch (none; a group with one unscored completion and
    one with a single scored one; a group, then a batch, without a scored completion): swift 4.3-4.6 give such a
    completion nansum's 0 in its group, and so does the adapter, bit for bit."""
    from repo_paths import HELPERS, ROOT

    plugin = tmp_path / "partly_unscored.py"
    plugin.write_text(UNSCORED_PLUGIN)
    plugins = [str(ROOT / "examples" / "swift_toy_plugin.py"), str(HELPERS / "record_plugin.py"), str(plugin)]
    swifts, ours = tmp_path / "swifts", tmp_path / "ours"
    for out, extra in ((swifts, []), (ours, SWITCHED_OFF)):
        train(toy_arguments(assets, out, steps=4, save_steps=10, loss_type=loss_type, external_plugins=plugins,
                            reward_funcs="toy_partly_unscored") + extra, out / "records", swifts_own=not extra)
    theirs, mine = logged_steps(swifts), logged_steps(ours)
    assert len(theirs) == 4 and any(s["loss"] != 0 for s in theirs)
    assert [{k: v for k, v in s.items() if not k.startswith("dgpo/")} for s in mine] == theirs
    unscored = [[i for i, r in enumerate(c["rewards"]) if r[0] != r[0]] for c in records(ours / "records")]
    assert unscored == [[], [1, 5, 6, 7], [0, 1, 4, 5, 6, 7], list(range(8))]


def test_the_command_line_trains_hadw_and_every_rank_holds_the_same_anchor(assets, tmp_path, ranks):
    """``verl-hadw-swift rlhf ... --adv_estimator hadw`` as a user types it, on ``ranks`` CPU ranks
    (``NPROC_PER_NODE``): it trains, logs hadw/* where swift logs, saves the anchor with each checkpoint, and every
    rank computes the same advantages from the same anchor at every step."""
    argv = toy_arguments(assets, tmp_path, steps=2, save_steps=2, per_device_train_batch_size=8 // ranks) + [
        "--adv_estimator", "hadw"]
    proc = command_line(argv, tmp_path / "records", ranks=ranks)
    print("\n[swift environment] command: verl-hadw-swift rlhf " + " ".join(argv))
    logged = [line for line in proc.stdout.splitlines() if "hadw/anchor_prior" in line]
    print("\n".join(f"[swift environment] log: {line}" for line in logged))
    assert proc.returncode == 0, failure(proc)
    steps = logged_steps(tmp_path)
    assert len(steps) == 2 and all("hadw/anchor_prior" in s and "hadw/phi_mean" in s for s in steps)
    per_rank = [records(tmp_path / "records", r) for r in range(ranks)]
    assert all(len(calls) == 2 for calls in per_rank), [len(c) for c in per_rank]
    local = {"rank", "completions", "solutions", "mask_tokens"}  # this process's rows; the rest is every process's
    for calls in per_rank[1:]:
        for mine, first in zip(calls, per_rank[0]):
            assert {k: v for k, v in mine.items() if k not in local} == {k: v for k, v in first.items()
                                                                         if k not in local}
    for call in zip(*per_rank):  # the processes' masks together: the adapter's loss tokens, swift's count
        assert sum(sum(c["mask_tokens"]) for c in call) == call[0]["num_items_in_batch"][0] == sum(call[0]["lengths"])
    print(f"[swift environment] ranks {ranks}: anchors after each step: "
          + str([(c['step'], c['anchor']['posteriors']) for c in per_rank[0]]))
    saved = json.loads((tmp_path / "checkpoint-2" / STATE_FILE).read_text())
    assert saved["global_step"] == 2 and saved["state"]["posteriors"] == per_rank[0][-1]["anchor"]["posteriors"]


def test_a_derived_steps_per_generation_is_checked_where_swift_decides_it(assets, tmp_path):
    """--generation_batch_size 16 with --per_device_train_batch_size 8 and GA 1 is --steps_per_generation
    2, which DGPO's valid-token averaging refuses; the flag check before a model loads sees no such flag, so the
    trainer swift builds checks the value swift derived (before a step is trained or anything saved)."""
    from verl_hadw.core.errors import ConfigError

    argv = toy_arguments(assets, tmp_path / "out", loss_type="dapo", generation_batch_size=16) + [
        "--adv_estimator", "dgpo"]
    with pytest.raises(ConfigError, match=r"--steps_per_generation 2 with --gradient_accumulation_steps 1: .* Swift "
                                          r"derived --steps_per_generation 2 from --generation_batch_size 16"):
        train(argv, tmp_path / "records")
    assert not list((tmp_path / "out").rglob("checkpoint-*"))


def test_a_reward_function_returning_text_is_named(assets, tmp_path):
    """Swift's own tensor conversion said "too many dimensions 'str'", naming no function; the trainer's
    reward functions are checked while swift scores a generation batch (before the anchor observes it)."""
    from repo_paths import HELPERS, ROOT

    from verl_hadw.core.errors import RewardValueError

    plugin = tmp_path / "verdict_plugin.py"
    plugin.write_text("from swift.rewards import ORM, orms\n\n\nclass Verdict(ORM):\n"
                      "    def __call__(self, completions, **kwargs):\n"
                      "        return ['yes' for _ in completions]\n\n\n"
                      "orms['verdict'] = Verdict\n")
    plugins = [str(ROOT / "examples" / "swift_toy_plugin.py"), str(HELPERS / "record_plugin.py"), str(plugin)]
    argv = toy_arguments(assets, tmp_path / "out", external_plugins=plugins, reward_funcs="verdict")
    with pytest.raises(RewardValueError, match=r"the reward function 'Verdict' returned str 'yes' for completion 0"):
        train(argv + ["--adv_estimator", "hadw"], tmp_path / "records")
    assert not list((tmp_path / "out").rglob("checkpoint-*"))
