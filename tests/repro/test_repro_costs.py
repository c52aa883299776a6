"""What a launch plan costs (``verl-hadw configs --plan PAPER --costs``), recomputed from the papers' settings."""

from __future__ import annotations

import pytest
from repro_runs import composed_runs

from verl_hadw.repro import compose as C

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Disabled critic as algorithm.adv_estimator != gae")]


@pytest.fixture(scope="module")
def composed():
    return composed_runs()


def test_run_cost_from_the_composed_config(composed):
    """Each figure recomputed here from the paper's settings (steps from epochs, verl's test cadence, avg@k x
    benchmark sizes, 12 bytes per parameter for a checkpoint with AdamW state)."""
    from verl_hadw.repro.costs import run_cost

    hadw_pass = {"paper": 500 + 16 * 30 + 16 * 40 + 272 + 4 * 675, "paper_dapo": 500 + 16 * 30 + 40 + 272 + 4 * 675,
                 "sampled": 4 * 500 + 16 * 30 + 16 * 40 + 4 * 272 + 4 * 675}
    assert hadw_pass == {"paper": 4592, "paper_dapo": 3992, "sampled": 6908}
    grpo = run_cost(composed["hadw_t1_qwen3_4b_grpo"], "train", "hadw_t1_qwen3_4b_grpo")
    assert (grpo.steps, grpo.train_samples) == (3 * (7500 // 256), 87 * 256 * 8) == (87, 178_176)
    assert (grpo.val_passes, grpo.val_per_pass, grpo.val_greedy_per_pass) == (1 + 17 + 1, 4592, 772)
    assert grpo.ckpt_each == 12 * 4.02e9 and grpo.ckpt_peak == 2 * grpo.ckpt_each and grpo.save_freq == 10
    assert grpo.ckpt_after == 4 * 4.02e9  # VERL_HADW_KEEP=final: the last weights
    dapo = run_cost(composed["hadw_t1_qwen3_8b_dapo"], "train", "hadw_t1_qwen3_8b_dapo", keep="all")
    assert (dapo.steps, dapo.val_passes, dapo.val_per_pass) == (261, 1 + 52 + 1, 3992)
    assert dapo.ckpt_after == dapo.ckpt_peak == 2 * 12 * 8.19e9
    g16 = run_cost(composed["hadw_t3_qwen3_4b_grpo_g16"], "train", "hadw_t3_qwen3_4b_grpo_g16", keep=1)
    assert g16.train_samples == 2 * grpo.train_samples and g16.ckpt_after == g16.ckpt_each
    old = run_cost(C.compose_run("hadw_t1_qwen3_4b_grpo", ["evaluation.protocol=sampled"]), "train", "x")
    assert old.val_samples == 19 * 6908 and old.gpu_hours > grpo.gpu_hours
    dgpo = run_cost(composed["dgpo_t1_dgpo"], "train", "dgpo_t1_dgpo")
    assert (dgpo.steps, dgpo.train_samples, dgpo.val_passes, dgpo.val_per_pass) == (230, 230 * 32 * 8, 24, 4 * 500)
    final = run_cost(C.compose_run("dgpo_t1_dgpo", ["eval=dgpo"]), "eval", "dgpo_t1_dgpo")
    assert (final.steps, final.train_samples, final.val_passes) == (0, 0, 1)
    assert final.val_per_pass == 32 * (30 + 30 + 40) + 4 * (500 + 272 + 675) and final.ckpt_after == 0


def test_plan_costs_cli_keeps_the_launcher_format(capsys, monkeypatch):
    from verl_hadw import cli

    assert cli.main(["configs", "--plan", "dgpo", "--only", "dgpo_t1_*"]) == 0
    plain = capsys.readouterr().out.splitlines()
    assert plain == ["eval dgpo_t1_base", "train dgpo_t1_grpo", "eval dgpo_t1_grpo", "train dgpo_t1_dgpo",
                     "eval dgpo_t1_dgpo"]  # what scripts/reproduce_paper.sh reads
    assert cli.main(["configs", "--plan", "dgpo", "--only", "dgpo_t1_*", "--costs", "--keep", "all"]) == 0
    table = capsys.readouterr().out
    rows = {
        tuple(line.split()[:2]): line.split() for line in table.splitlines() if line.startswith(("train ", "eval "))
    }
    assert rows["train", "dgpo_t1_grpo"][2:7] == ["230", "58,880", "24", "x", "2,000"]
    eval_pass = 32 * (30 + 30 + 40) + 4 * (500 + 272 + 675)
    assert rows["eval", "dgpo_t1_base"][2:7] == ["0", "0", "1", "x", f"{eval_pass:,}"]
    total = next(line for line in table.splitlines() if line.startswith("TOTAL (3 eval, 2 train)")).split()
    assert total[5:8] == ["460", "117,760", f"{2 * 24 * 2000 + 3 * eval_pass:,}"]
    assert "VERL_HADW_KEEP=all" in table and "12 B/param" in table
    with pytest.raises(SystemExit) as refused:
        cli.main(["configs", "--plan", "hadw", "--only", "hadw_t1_qwen3_4b_grpo", "--costs", "--keep", "x"])
    assert refused.value.code == 2 and "error: argument --keep: 'x': use final" in capsys.readouterr().err
    monkeypatch.setenv("VERL_HADW_KEEP", "x")  # the same mistake in the environment names the variable
    assert cli.main(["configs", "--plan", "hadw", "--only", "hadw_t1_qwen3_4b_grpo", "--costs"]) == 2
    assert "error: environment variable VERL_HADW_KEEP: VERL_HADW_KEEP='x'" in capsys.readouterr().err

