"""HA-DW and DGPO through Axolotl's own CLI on CPU (the toy task, a tiny local model, the documented YAML): ``axolotl
train`` trains and logs hadw/* into Axolotl's log; the same YAML run by the CLI's function in this process gives the
same run bit for bit; a run killed during a save, resumed from its newest whole checkpoint, ends as the run that was
never killed, bit for bit; DGPO and HA-DW over DGPO train and log dgpo/*; with every method switch off the plugin is
Axolotl's own GRPO, bit for bit. Each run's records (what TRL held, the advantages handed it) are kept for the
comparison with TRL's adapter and verl's estimator (``tests/hf_trainer/test_across_frameworks.py``)."""

import os
import shutil
import sys
from pathlib import Path

import pytest
import torch
from axolotl_runs import (
    NONE_AT,
    RECORDING,
    anchor_file,
    axolotl_command,
    logged,
    records,
    train_here,
    train_process,
    weights,
    write_yaml,
)
from repo_paths import HELPERS

from verl_hadw.toy.task import compute_score

SWITCHED_OFF = {"hadw_adv_estimator": "dgpo", "dgpo_dgae": False, "dgpo_dqw": False, "dgpo_valid_token_norm": False,
                "dgpo_epsilon": 1e-4}
OURS = ["plugins", "hadw_adv_estimator", "hadw_lambda_scale"]  # the documented YAML's keys of the plugin


def keep(name: str, folder: Path) -> None:
    """Copy a run's records to ``$VERL_HADW_RECORDS/<name>`` (the nox session keeps them for ``nox -s compare``)."""
    target = os.environ.get("VERL_HADW_RECORDS")
    if target:
        shutil.copytree(folder, Path(target) / name, dirs_exist_ok=True)


def holds_what_trl_held(calls: list[dict]) -> None:
    """Each record is TRL's own: every completion scored by the toy scorer, and the loss tokens of TRL's masks summing
    to its ``num_items_in_batch`` (what the dapo loss divides by)."""
    for call in calls:
        assert len(call["completions"]) == len(call["solutions"]) == len(call["advantages"])
        assert sum(call["mask_tokens"]) == call["num_items_in_batch"]
        assert all(compute_score("toy", c, s) in (0.0, 1.0) for c, s in zip(call["completions"], call["solutions"]))


@pytest.fixture(scope="module")
def documented(assets):
    """``axolotl train hadw.yml --launcher python``, the documented command on the documented YAML."""
    done = train_process(axolotl_command(), "train", assets["hadw.yml"], "--launcher", "python")
    return done, Path(assets["hadw.yml"]).parent / "hadw"


def test_the_documented_yaml_trains_and_logs_hadw_into_axolotls_log(documented, capsys):
    done, out = documented
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    lines = [line for line in (done.stdout + done.stderr).splitlines() if "'hadw/anchor_posterior'" in line]
    with capsys.disabled():  # the hadw/* values of Axolotl's log lines, in CI's output
        for line in lines:
            print("\n[axolotl train] " + ", ".join(p.strip() for p in line.split(",") if "hadw/" in p))
    assert len(lines) == 3
    steps = logged(out)
    assert [s["hadw/batch_acc"] for s in steps] == [s["reward"] for s in steps]  # binary rewards: y_t is the mean
    assert all(anchor_file(out, step)["state"]["committed_steps"] == step - 1 for step in (1, 2, 3))


def test_the_cli_function_in_this_process_is_the_command_bit_for_bit(documented, assets, tmp_path):
    _, theirs = documented
    out = tmp_path / "hadw"
    train_here(write_yaml(assets, out, trainer_cls=RECORDING), out / "records")
    assert logged(out) == logged(theirs) and anchor_file(out) == anchor_file(theirs)
    assert all(torch.equal(a, b) for a, b in zip(weights(out).values(), weights(theirs).values(), strict=True))
    calls = records(out / "records")
    assert [c["step"] for c in calls] == [1, 2, 3] and any(any(a != 0 for a in c["advantages"]) for c in calls)
    holds_what_trl_held(calls)
    assert calls[-1]["anchor"] == anchor_file(out)["state"]
    keep("hadw", out / "records")


def test_a_kill_during_a_save_loses_nothing_and_the_resume_continues_bit_for_bit(documented, assets, tmp_path):
    """Killed while checkpoint-2's ``trainer_state.json`` was half written, then resumed from checkpoint-1 (the newest
    whole one, which the refusal of checkpoint-2 names): steps 2-3 and checkpoint-3 equal the uninterrupted run's."""
    _, straight = documented
    killed = tmp_path / "killed"
    config = write_yaml(assets, killed)
    done = train_process(sys.executable, HELPERS / "axolotl_killed_run.py", config,
                         env={"VERL_HADW_KILL_AT": "trainer_state", "VERL_HADW_KILL_STEP": "2"})
    assert done.returncode == -9, (done.stdout[-2000:], done.stderr[-2000:])
    assert (killed / "checkpoint-2" / "verl_hadw_anchor.json").exists()  # written before the Trainer's files
    train_here(write_yaml(assets, killed, resume_from_checkpoint=str(killed / "checkpoint-1")))
    assert anchor_file(killed) == anchor_file(straight)
    assert all(torch.equal(a, b) for a, b in zip(weights(killed).values(), weights(straight).values(), strict=True))
    assert logged(killed)[1:] == logged(straight)[1:]


@pytest.mark.parametrize("keys", [{"hadw_adv_estimator": "dgpo"}, {"hadw_base": "dgpo"}],
                         ids=["dgpo", "hadw_over_dgpo"])
def test_dgpo_and_hadw_over_dgpo_train_and_log_their_metrics(assets, tmp_path, keys):
    out = tmp_path / "run"
    train_here(write_yaml(assets, out, trainer_cls=RECORDING, **keys), out / "records")
    steps = logged(out)
    assert len(steps) == 3 and all("dgpo/valid_groups" in s and "dgpo/valid_token_ratio" in s for s in steps)
    assert all(("hadw/anchor_prior" in s) == ("hadw_base" in keys) for s in steps)
    calls = records(out / "records")
    assert [c["step"] for c in calls] == [1, 2, 3]
    holds_what_trl_held(calls)
    saved = anchor_file(out)
    assert saved["options"]["algorithm.adv_estimator"] == keys.get("hadw_adv_estimator", "hadw")
    keep("dgpo" if "hadw_adv_estimator" in keys else "hadw_over_dgpo", out / "records")


def test_switched_off_it_is_axolotls_grpo_bit_for_bit(assets, tmp_path):
    """DGPO without DGAE, DQW and valid-token averaging, with TRL's epsilon (1e-4), logs the losses and leaves the
    weights of the same YAML without the plugin (Axolotl's own GRPO, in a process of its own) bit for bit."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    train_here(write_yaml(assets, ours, **SWITCHED_OFF))
    done = train_process(sys.executable, "-m", "axolotl.cli.train",
                         write_yaml(assets, theirs, **dict.fromkeys(OURS)))
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    mine, axolotls = logged(ours), logged(theirs)
    assert len(axolotls) == 3 and any(s["loss"] != 0 for s in axolotls) and not any("dgpo/" in k for k in axolotls[0])
    assert [{k: v for k, v in s.items() if not k.startswith("dgpo/")} for s in mine] == axolotls
    assert all(torch.equal(a, b) for a, b in zip(weights(ours).values(), weights(theirs).values(), strict=True))


def test_switched_off_it_is_axolotls_grpo_bit_for_bit_where_completions_are_unscored(assets, tmp_path):
    """A reward function that leaves chosen completions unscored (``axolotl_runs.partly_unscored``): TRL 1.9.0,
    which Axolotl 0.19.0 runs, leaves them out of their group's mean and std (advantage 0), and so does the plugin."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    unscored = {"reward_funcs": ["axolotl_runs.partly_unscored"]}
    train_here(write_yaml(assets, ours, trl=unscored, max_steps=4, trainer_cls=RECORDING, **SWITCHED_OFF),
               ours / "records")
    done = train_process(sys.executable, "-m", "axolotl.cli.train",
                         write_yaml(assets, theirs, trl=unscored, max_steps=4, **dict.fromkeys(OURS)))
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    mine, axolotls = logged(ours, 4), logged(theirs, 4)
    assert len(axolotls) == 4 and any(s["loss"] != 0 for s in axolotls)
    assert [{k: v for k, v in s.items() if not k.startswith("dgpo/")} for s in mine] == axolotls
    assert all(torch.equal(a, b) for a, b in zip(weights(ours, 4).values(), weights(theirs, 4).values(), strict=True))
    calls = records(ours / "records")
    assert [[c["advantages"][i] for i in sorted(none_at)] for c, none_at in zip(calls, NONE_AT, strict=True)] == [
        [0.0] * len(n) for n in NONE_AT]
