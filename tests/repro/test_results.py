"""`verl-hadw results` on synthetic run logs written by verl's own loggers (tensorboard, file, console)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from verl_hadw import cli
from verl_hadw.repro import results

HADW = ("math500", "aime25", "amc23", "minerva", "olympiadbench")
DGPO = ("aime24", "aime25", "amc23", "math500", "minerva", "olympiadbench")
N = {"aime24": 32, "aime25": 16, "amc23": 16, "math500": 4, "minerva": 4, "olympiadbench": 4}


def val_metrics(values: dict[str, float], levels: dict[str, float] | None = None, n=N) -> dict[str, float]:
    """What verl's _val_metrics_update logs: val-core/<ds>/acc/mean@N (+ aux metrics results must ignore)."""
    out = {}
    for ds, v in values.items():
        out[f"val-core/{ds}/acc/mean@{n[ds]}"] = v
        out[f"val-core/{ds}/acc/best@{n[ds]}/mean"] = min(1.0, v + 0.2)
        out[f"val-aux/{ds}/reward/mean@{n[ds]}"] = 2 * v - 1  # ±1 rewards: not the accuracy
        if n[ds] > 2:
            out[f"val-aux/{ds}/acc/mean@2"] = 0.01  # a smaller N: ignored
    for key, v in (levels or {}).items():
        out[f"val-aux/math500/{key}/mean@4"] = v
    return out


def track(monkeypatch, backends, run_dir, steps: dict[int, dict], jsonl_name="metrics/a.jsonl"):
    """Log ``steps`` through verl's Tracking the way the trainer does (also a training metric per step)."""
    from verl.utils.tracking import Tracking

    monkeypatch.setenv("TENSORBOARD_DIR", str(run_dir / "tensorboard"))
    (run_dir / jsonl_name).parent.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(run_dir / jsonl_name))
    tracker = Tracking(project_name="p", experiment_name=run_dir.name, default_backend=backends)
    for step, metrics in steps.items():
        tracker.log(data={"critic/score/mean": 0.5, **metrics}, step=step)
    tracker.finish()


@pytest.fixture
def runs(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    # 1) HA-DW GRPO, tensorboard only: validation every 5 steps, the last one at step 87
    grpo = root / "hadw" / "hadw_t1_qwen3_4b_grpo"
    steps = {s: val_metrics({ds: 0.2 + s / 1000 for ds in HADW}) for s in range(0, 86, 5)}
    steps[87] = val_metrics(dict(zip(HADW, (0.75, 0.20, 0.60, 0.34, 0.44))),
                            {"acc_easy": 0.90, "acc_mid": 0.80, "acc_hard": 0.60, "acc_level4": 0.65})
    track(monkeypatch, ["tensorboard"], grpo, steps)
    # 2) HA-DW GRPO+HA-DW, the jsonl file logger only, resumed once: the second attempt re-logs step 40
    hadw = root / "hadw" / "hadw_t1_qwen3_4b_grpo_hadw"
    track(monkeypatch, ["file"], hadw, {40: val_metrics({ds: 0.10 for ds in HADW})}, "metrics/1-attempt.jsonl")
    track(monkeypatch, ["file"], hadw, {
        40: val_metrics({ds: 0.30 for ds in HADW}),
        87: val_metrics(dict(zip(HADW, (0.78, 0.204, 0.634, 0.368, 0.447))),
                        {"acc_easy": 0.92, "acc_mid": 0.80, "acc_hard": 0.65}),
    }, "metrics/2-attempt.jsonl")
    # 3) DGPO: console log of the training (MATH500 only, numpy scalars as verl prints them) + eval/ pass
    dgpo = root / "dgpo" / "dgpo_t1_dgpo"
    from verl.utils.logger.aggregate_logger import concat_dict_to_str

    (dgpo / "logs").mkdir(parents=True)
    lines = ["(TaskRunnerV1 pid=1) " + concat_dict_to_str({"val-core/math500/acc/mean@4": np.float64(v),
                                                           "training/epoch": 0}, step=s)
             for s, v in ((0, 0.50), (10, 0.60), (230, 0.70))]
    (dgpo / "logs" / "a.log").write_text("noise\n" + "\n".join(lines) + "\n")
    track(monkeypatch, ["tensorboard"], dgpo / "eval",
          {230: val_metrics(dict(zip(DGPO, (0.2385, 0.1021, 0.6102, 0.7425, 0.3107, 0.3833))))})
    # 4) a run of nobody's table
    other = root / "misc" / "my_experiment"
    track(monkeypatch, ["file"], other, {3: val_metrics({"math500": 0.5, "gsm8k": 0.9}, n=N | {"gsm8k": 1})})
    return {"grpo": grpo, "hadw": hadw, "dgpo": dgpo, "other": other}


def test_read_run_all_three_log_formats(runs):
    grpo = results.read_run(runs["grpo"])
    assert grpo.step == 87 and grpo.source == "training validation"
    assert grpo.final == pytest.approx({"math500": 75.0, "aime25": 20.0, "amc23": 60.0, "minerva": 34.0,
                                        "olympiadbench": 44.0})
    assert grpo.samples == {"math500": 4, "aime25": 16, "amc23": 16, "minerva": 4, "olympiadbench": 4}
    assert grpo.levels["acc_hard"] == pytest.approx(60.0) and grpo.levels["acc_level4"] == pytest.approx(65.0)
    assert list(grpo.curves.index) == [*range(0, 86, 5), 87]
    hadw = results.read_run(runs["hadw"], step=45)
    assert hadw.step == 40 and hadw.final["math500"] == pytest.approx(30.0)  # the re-logged (later) value
    dgpo = results.read_run(runs["dgpo"])
    assert dgpo.source == "eval" and dgpo.step == 230 and dgpo.samples["aime24"] == 32
    assert dgpo.final["math500"] == pytest.approx(74.25)
    # training curves come from the console log (np.float64(...) values parsed), not from the eval pass
    assert list(dgpo.curves.index) == [0, 10, 230] and dgpo.curves["math500"].tolist() == pytest.approx([50, 60, 70])


@pytest.mark.slow
def test_results_command_prints_paper_tables_and_writes_plot_and_csv(runs, tmp_path, capsys):
    plot, table = tmp_path / "out" / "results.png", tmp_path / "out" / "results.csv"
    code = cli.main(["results", *map(str, runs.values()), "--plot", str(plot), "--csv", str(table)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "HA-DW Table 1: main results" in out and "DGPO Table 1" in out and "DGPO Table 3" in out
    assert "HA-DW Table 2" in out and "HA-DW Table 7" in out  # these tables share the Table 1 runs
    assert "HA-DW Table 3" in out and "DGPO Table 4" not in out  # no run of Table 4 given
    rows = list(csv.DictReader(open(table)))
    t1 = [r for r in rows if r["table"] == "hadw_t1"]
    assert [r[""] for r in t1] == ["ours", "paper", "ours - paper"] * 2
    ours, paper, delta = t1[0], t1[1], t1[2]
    assert ours["run"] == "Qwen3-4B-Base GRPO" and float(ours["MATH500"]) == pytest.approx(75.0)
    assert float(paper["MATH500"]) == 75.4 and float(paper["AVG"]) == 46.5
    assert float(ours["AVG"]) == pytest.approx((75 + 20 + 60 + 34 + 44) / 5)
    assert float(delta["AIME25"]) == pytest.approx(20.0 - 19.6)
    dgpo = [r for r in rows if r["table"] == "dgpo_t1"]
    assert dgpo[0]["run"] == "DGPO" and float(dgpo[0]["AVG"]) == pytest.approx(39.79, abs=0.01)
    t3 = [r for r in rows if r["table"] == "dgpo_t3"]
    assert t3[1]["AIME24"] == "" and float(t3[1]["AVG"]) == 39.79  # Table 3 prints only the average
    other = [r for r in rows if r["table"] == "other"]
    assert other[0]["run"] == "my_experiment" and float(other[0]["gsm8k"]) == pytest.approx(90.0)
    # MATH500 by level and the paper's Fig. 1(c) comparison
    assert "MATH500 by difficulty level" in out
    assert "ours +5.0, paper +3.4" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 20_000


def test_results_without_metrics_fails_clearly(tmp_path, capsys):
    empty = tmp_path / "runs" / "hadw" / "empty_run"
    (empty / "metrics").mkdir(parents=True)
    (empty / "metrics" / "x.jsonl").write_text(json.dumps({"step": 1, "data": {"critic/score/mean": 1.0}}) + "\n")
    assert cli.main(["results", str(empty), "--no-plot"]) == 2
    err = capsys.readouterr().err
    assert "no verl validation metrics (val-core/<data_source>/acc/mean@N)" in err and "empty_run" in err
    assert cli.main(["results", str(tmp_path / "nope"), "--no-plot"]) == 2
    assert "argument RUN_DIR: no such file or directory" in capsys.readouterr().err
