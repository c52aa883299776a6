"""configs/: the runs in ``<paper>/experiments/<run>.yaml`` beside the bases they compose from, no Python in it, and
the one mapping from a run name to its Hydra config name (``repro.compose.config_name``)."""


import pytest
from omegaconf import OmegaConf
from repo_paths import ROOT

from verl_hadw.repro import catalogue as K
from verl_hadw.repro import compose as C

CONFIGS = ROOT / "configs"
RUN_FILES = sorted(CONFIGS.glob("*/experiments/*.yaml"))


def test_every_run_sits_in_its_papers_experiments_folder():
    assert len(RUN_FILES) == 46 and not list(CONFIGS.glob("*.yaml"))  # none left at the top
    assert {p.stem for p in RUN_FILES} == set(K.run_names()) | set(K.ALIASES) | set(K.RELEASED_CODE_RUNS)
    for path in RUN_FILES:
        assert path.parent.parent.name == K.paper_of(path.stem), path
    assert sorted(p.name for p in CONFIGS.iterdir()) == ["cpu", "dgpo", "eval", "hadw"]
    assert not list(CONFIGS.rglob("*.py"))  # Hydra reads file:// paths; the wheel ships a namespace package


@pytest.mark.parametrize("path", RUN_FILES, ids=lambda p: p.stem)
def test_run_file_header_and_defaults(path):
    """Hydra reads ``@package`` from the first lines only (without it the run composes under
    ``<paper>.experiments``); defaults are absolute (a relative ``ppo_trainer`` would be looked for next to the
    file); ``/eval: null`` last, so that ``eval=<paper>`` overrides the run's own keys as ``+eval`` once did."""
    run, paper = path.stem, path.parent.parent.name
    lines = path.read_text().splitlines()
    assert lines[0] == "# @package _global_"
    launch = next(line for line in lines if line.startswith("# Launch:"))
    assert f"scripts/train.sh {run} " in launch and f"--config-name={paper}/experiments/{run})" in launch
    config = OmegaConf.to_container(OmegaConf.load(path))
    defaults = config["defaults"]
    assert defaults[0] == "/ppo_trainer" and defaults[-2:] == ["_self_", {"/eval": None}]
    assert all(d.startswith("/") for d in defaults[:-2]), defaults
    assert config["trainer"]["experiment_name"] == K.ALIASES.get(run, run)


def test_run_name_to_config_name_and_description():
    assert C.config_dir() == CONFIGS
    assert C.config_name("hadw_t1_qwen3_4b_grpo_hadw") == "hadw/experiments/hadw_t1_qwen3_4b_grpo_hadw"
    assert C.config_name("dgpo_t1_base") == "dgpo/experiments/dgpo_t1_base"
    assert C.available_runs() == sorted(p.stem for p in RUN_FILES)
    assert C.describe("dgpo_t1_dgpo").startswith("DGPO Table 1: Qwen2.5-Math-7B, DGPO")  # not the @package line
    with pytest.raises(ValueError, match="no run config 'hadw_t9' .* Known runs: dgpo_t1_base, "):
        C.config_name("hadw_t9")


def test_the_eval_pass_is_selected_without_plus():
    cfg = C.compose_run("dgpo_t1_base", ["eval=dgpo"])
    assert cfg.trainer.val_only is True and list(cfg.actor_rollout_ref.actor.checkpoint.load_contents) == ["model"]
    assert C.compose_run("dgpo_t1_base").trainer.val_only is False
    with pytest.raises(ValueError, match=r"The evaluation pass is eval=<paper>, without '\+'"):
        C.compose_run("dgpo_t1_base", ["+eval=dgpo"])


def test_a_top_level_config_dir_and_duplicate_names(tmp_path, monkeypatch):
    """``$VERL_HADW_CONFIGS=configs/cpu`` (scripts/gpu_smoke.sh --cpu): its top-level ``demo.yaml`` is a run named
    ``demo``; a run name held by two files is refused (the name alone must say which file runs)."""
    monkeypatch.setenv("VERL_HADW_CONFIGS", str(CONFIGS / "cpu"))
    assert C.available_runs() == ["demo"] and C.config_name("demo") == "demo"
    assert C.describe("demo").startswith("CPU demo / end-to-end config")
    (tmp_path / "hadw" / "experiments").mkdir(parents=True)
    for path in (tmp_path / "x.yaml", tmp_path / "hadw" / "experiments" / "x.yaml"):
        path.write_text("a: 1\n")
    monkeypatch.setenv("VERL_HADW_CONFIGS", str(tmp_path))
    with pytest.raises(ValueError, match="two run configs are named 'x'"):
        C.available_runs()
