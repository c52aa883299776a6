"""The verl versions the plugin supports (``VERL_RANGE``: 0.9.0 and 0.9.1) and what each one gets.

- Outside the range (0.8.0, 0.10) verl's adapter refuses at import, naming the installed version and the range:
  faked here by the version number alone (an in-process stand-in for ``installed_verl``), and for 0.8.0 with the real
  wheel (``pip download verl==0.8.0 --no-deps``, put in front of this environment's verl) in fresh processes.
- verl 0.9.0 has no checkpoint hook (``trainer.checkpoint_callback_class``): under its v1 trainer the estimator
  saves the anchor as per-step snapshots, a resume restores them exactly, the callback's import says what to do
  instead, and a config that names the callback is told that verl ignores it. In this (0.9.1) environment the hook's
  absence is faked (``support.has_checkpoint_callback``), so every check runs the 0.9.0 path through verl
  0.9.1's own ``compute_advantage`` and ``SkipManager``, which 0.9.0 shares (their code is identical); in an
  environment with verl 0.9.0 the same tests run it for real (``HOOK`` then has only the absent case), and
  ``tests/e2e/test_verl090_e2e.py`` runs 0.9.0's real ``main_ppo``.
"""

import importlib
import json
import os
import subprocess
import sys
import warnings

import pytest
from anchor_run import batch, verl_save
from omegaconf import OmegaConf
from repo_paths import ROOT
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.utils.skip.skip_manager import SkipManager

import verl_hadw
from verl_hadw.core.errors import MissingAnchorStateError
from verl_hadw.verl import metrics, process_state, support
from verl_hadw.verl.anchor_store.legacy_snapshots import SNAPSHOT_DIR, LegacySnapshots, from_call
from verl_hadw.verl.config import checks as config_check
from verl_hadw.verl.config.run_options import read_call
from verl_hadw.verl.support import UnsupportedVerlError

KEY = "proj/v090"
CALLBACK = "verl_hadw.verl.checkpoint_callback.HadwCheckpointCallback"
REAL_HOOK = support.has_checkpoint_callback()


@pytest.fixture
def no_hook(monkeypatch):
    """verl 0.9.0: no ``verl.trainer.ppo.checkpoint_callback`` (faked on 0.9.1, real on 0.9.0)."""
    monkeypatch.setattr(support, "has_checkpoint_callback", lambda: False)
    monkeypatch.setattr(support, "installed_verl", lambda: "0.9.0")


# ------------------------------------------------------------------------------------------ the range
@pytest.mark.parametrize("version", ["0.9.0", "0.9.1", "0.9.2", "0.9.1.dev0", "0.9.0+local"])
def test_the_range_holds_0_9(version):
    assert verl_hadw.VERL_RANGE == ">=0.9.0,<0.10"
    assert support.is_supported(version)


def test_the_checkpoint_hook_is_seen_without_importing_verl():
    """``verl-hadw doctor`` reads what the installed verl supports without importing it (``find_spec`` of verl's
    submodule imported verl.trainer.ppo, hence verl and torch: half of doctor's time)."""
    out = subprocess.run([sys.executable, "-c", "import sys; from verl_hadw.verl import support as v; "
                          "print(v.has_checkpoint_callback(), 'verl' in sys.modules, 'torch' in sys.modules)"],
                         capture_output=True, text=True, check=True).stdout.split()
    import verl

    has_it = verl.__version__ != "0.9.0"  # 0.9.1 has it (this venv), 0.9.0 not (the verl 0.9.0 environment)
    assert out == [str(has_it), "False", "False"]  # and nothing of verl or torch was imported


@pytest.mark.parametrize("version", ["0.8.0", "0.7.1", "0.10.0", "0.10.0.dev0", "1.0.0", None, "not-a-version"])
def test_outside_the_range_is_refused_naming_version_and_range(monkeypatch, version):
    assert not support.is_supported(version)
    monkeypatch.setattr(support, "installed_verl", lambda: version)
    with pytest.raises(UnsupportedVerlError) as info:
        support.check()
    assert f"verl {version} is installed" in str(info.value) and "verl>=0.9.0,<0.10" in str(info.value)
    assert ("no verl.plugins entry-point loading" in str(info.value)) == (version in ("0.8.0", "0.7.1"))


def test_the_installed_verl_is_read_without_importing_it():
    import verl

    assert support.installed_verl() == verl.__version__
    assert REAL_HOOK == (verl.__version__ != "0.9.0")


def test_importing_the_adapter_refuses_a_faked_0_10(tmp_path):
    """A fresh process: every module of verl's adapter goes through ``verl_hadw/verl/__init__``'s check (a verl
    package that reads as 0.10.0, in front of this environment's verl)."""
    (tmp_path / "verl" / "version").mkdir(parents=True)
    (tmp_path / "verl" / "__init__.py").write_text("")
    (tmp_path / "verl" / "version" / "version").write_text("0.10.0\n")
    code = "try:\n    import verl_hadw.verl.entry_point\nexcept ImportError as e:\n    print(type(e).__name__, e)\n"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                         check=True).stdout
    assert out.startswith("UnsupportedVerlError verl-hadw supports verl>=0.9.0,<0.10, but verl 0.10.0 is installed")


@pytest.fixture(scope="module")
def verl080(tmp_path_factory):
    """The real verl 0.8.0 wheel, unpacked into a folder that goes in front of this environment's verl."""
    folder = tmp_path_factory.mktemp("verl080")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    got = subprocess.run([*pip, "download", "verl==0.8.0", "--no-deps", "-d", str(folder / "wheel")],
                         capture_output=True, text=True)
    if got.returncode != 0:
        pytest.fail(f"cannot download verl 0.8.0 from the package index (CI installs from it too): "
                    f"{got.stderr[-500:]}")
    wheel = next((folder / "wheel").glob("verl-0.8.0-*.whl"))
    subprocess.run([*pip, "install", "--no-deps", "--target", str(folder / "site"), str(wheel)], check=True)
    return str(folder / "site")


def run_080(site, *args, env=None):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([site, str(ROOT)]), **(env or {})}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)


@pytest.mark.slow
def test_real_verl_0_8_0_is_refused_where_a_user_meets_the_plugin(verl080):
    """0.8.0 loads no entry point, so a user meets the plugin by importing it, through VERL_USE_EXTERNAL_MODULES
    (which propagates import errors), or in ``verl-hadw doctor``."""
    refusal = "verl-hadw supports verl>=0.9.0,<0.10, but verl 0.8.0 is installed"
    direct = run_080(verl080, "-c", "import verl; print(verl.__version__); import verl_hadw.verl.entry_point")
    assert direct.stdout.startswith("0.8.0") and "UnsupportedVerlError" in direct.stderr and refusal in direct.stderr
    env_var = run_080(verl080, "-c", "import verl", env={"VERL_USE_EXTERNAL_MODULES": "verl_hadw.verl.entry_point"})
    assert env_var.returncode != 0 and refusal in env_var.stderr
    callback = run_080(verl080, "-c", "import verl_hadw.verl.checkpoint_callback")
    assert callback.returncode != 0 and refusal in callback.stderr
    doctor = run_080(verl080, "-m", "verl_hadw.cli", "doctor")
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    assert f"[FAIL] verl version: {refusal}" in doctor.stdout


@pytest.mark.slow  # the whole doctor in a subprocess (two fresh verl imports): 12 s of the quick loop
def test_doctor_says_what_this_verl_supports():
    out = subprocess.run([sys.executable, "-m", "verl_hadw.cli", "doctor"], capture_output=True, text=True, cwd=ROOT)
    import verl

    assert f"[ok] verl version: {verl.__version__} (verl-hadw supports verl>=0.9.0,<0.10" in out.stdout
    what = "checks the config before any worker starts" if REAL_HOOK else "the config is checked at the first"
    assert what in out.stdout


# ------------------------------------------------------------------------------------------ verl 0.9.0
def v1_config(ckpt, save_freq=2, callback=CALLBACK, resume_path=None, **trainer):
    return OmegaConf.create({
        "algorithm": {"adv_estimator": "hadw", "norm_adv_by_std_in_grpo": True,
                      "hadw": {"state_key": KEY, "anchor": {"eta": 3.0, "window": 4}}},
        "trainer": {"use_v1": True, "default_local_dir": str(ckpt), "save_freq": save_freq,
                    "resume_mode": "resume_path" if resume_path else "auto", "resume_from_path": resume_path,
                    "checkpoint_callback_class": callback, **trainer},
    })


def train(cfg, first, last, calls=1):
    """verl's v1 ``fit`` from ``first`` to ``last``: ``calls`` estimator calls a step (separate_async:
    ``parameter_sync_step``), then ``_save_checkpoint`` when due (0.9.0: no callback after it)."""
    rows = []
    for step in range(first, last + 1):
        SkipManager.set_step(step)
        for call in range(calls):
            compute_advantage(batch(10 * step + call), "hadw", config=cfg.algorithm)
        rows.append({"step": step, **metrics.pop(step)})
        if cfg.trainer.save_freq > 0 and (step % cfg.trainer.save_freq == 0 or step == last):
            verl_save(cfg.trainer.default_local_dir, step)
    return rows


def restart():
    """A new driver process: nothing in memory, verl's ``fit`` starts again (``SkipManager.init``)."""
    process_state.reset()
    SkipManager.skip_instances = {}


def test_v1_without_the_hook_gets_the_snapshot_back_end(tmp_path, no_hook):
    snapshots = from_call(read_call(v1_config(tmp_path).algorithm))
    assert isinstance(snapshots, LegacySnapshots) and snapshots.local_dir == str(tmp_path)
    assert "verl 0.9.0's v1 trainer" in snapshots.trainer


@pytest.mark.verl091
def test_v1_with_the_hook_keeps_the_callbacks_files(tmp_path):
    assert from_call(read_call(v1_config(tmp_path).algorithm)) is None


@pytest.mark.parametrize("calls", [1, 4], ids=["sync", "separate_async"])
def test_v1_resume_without_the_hook_continues_exactly(tmp_path, no_hook, calls):
    straight = train(v1_config(tmp_path / "straight"), 1, 5, calls)
    assert sorted(os.listdir(tmp_path / "straight" / SNAPSHOT_DIR)) == ["step_2.json", "step_4.json", "step_5.json"]
    restart()
    train(v1_config(tmp_path / "a"), 1, 2, calls)
    restart()
    resumed = train(v1_config(tmp_path / "a"), 3, 5, calls)  # resume_mode=auto: verl loads global_step_2
    assert resumed == straight[2:]
    saved = json.loads((tmp_path / "a" / SNAPSHOT_DIR / "step_2.json").read_text())
    assert saved["global_step"] == 2 and saved["state"]["open_step"] == 2  # committed when step 3 observes


@pytest.mark.parametrize("before, after", [("hadw", "dgpo"), ("dgpo", "hadw")])
def test_v1_switching_estimator_on_resume_is_refused_without_the_hook(tmp_path, no_hook, before, after):
    """The snapshots carry the options-only record of a run without an anchor too (``record_estimator``)."""
    from verl_hadw.core.errors import ResumeConflictError

    def cfg(estimator):
        return OmegaConf.merge(v1_config(tmp_path), {"algorithm": {"adv_estimator": estimator}})

    train(cfg(before), 1, 2)
    restart()
    with pytest.raises(ResumeConflictError, match=f"algorithm.adv_estimator: {before!r} -> {after!r}"):
        train(cfg(after), 3, 3)


def test_v1_resume_without_a_snapshot_names_no_callback(tmp_path, no_hook):
    verl_save(tmp_path, 2)  # a checkpoint written without the anchor
    with pytest.raises(MissingAnchorStateError) as info:
        train(v1_config(tmp_path), 3, 3)
    assert "verl 0.9.0's v1 trainer" in str(info.value) and "no anchor snapshot for step 2" in str(info.value)
    assert "callback" not in str(info.value).replace("no checkpoint callback before verl 0.9.1", "")


def test_the_fresh_start_guard_names_no_callback_without_the_hook(no_hook):
    node = OmegaConf.create({"adv_estimator": "hadw", "hadw": {"state_key": KEY}})  # no trainer keys: no back-end
    SkipManager.set_step(3)
    with pytest.raises(MissingAnchorStateError) as info:
        compute_advantage(batch(3), "hadw", config=node)
    assert "Next time set trainer.save_freq > 0 (the anchor's per-step snapshots)" in str(info.value)
    assert CALLBACK not in str(info.value)


def test_the_callback_import_says_what_to_do_without_the_hook(monkeypatch, no_hook):
    for name in ("verl_hadw.verl.checkpoint_callback",):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with pytest.raises(ImportError) as info:
        importlib.import_module("verl_hadw.verl.checkpoint_callback")
    assert "needs verl>=0.9.1" in str(info.value) and "verl 0.9.0 has none" in str(info.value)
    assert "Remove trainer.checkpoint_callback_class" in str(info.value) and "per-step snapshots" in str(info.value)


@pytest.mark.parametrize("callback", [CALLBACK, None])
def test_first_call_says_the_callback_is_ignored(tmp_path, no_hook, callback):
    cfg = v1_config(tmp_path, callback=callback)
    SkipManager.set_step(1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compute_advantage(batch(1), "hadw", config=cfg.algorithm)
    said = [str(w.message) for w in caught if "is ignored" in str(w.message)]
    if callback is None:
        assert not said
        return
    assert said == [config_check.ignored_callback(cfg.algorithm, cfg.trainer)]
    assert f"trainer.checkpoint_callback_class={CALLBACK} is ignored: verl 0.9.0 has no checkpoint callbacks" in said[0]
    assert "verl_hadw_anchor/" in said[0] and "(checked at start-up)" not in said[0]
    assert config_check.unsaved_anchor(cfg.algorithm, cfg.trainer) is None  # the snapshots save it: no "set the ..."


@pytest.mark.verl091
def test_with_the_hook_nothing_is_ignored(tmp_path):
    assert config_check.ignored_callback(v1_config(tmp_path).algorithm, v1_config(tmp_path).trainer) is None
    assert "Set trainer.checkpoint_callback_class" in config_check.unsaved_anchor(
        v1_config(tmp_path, callback=None).algorithm, v1_config(tmp_path, callback=None).trainer)


# ------------------------------------------------------------------------------------------ the start-up check
def composed(name: str, *overrides: str, folder: str = "configs"):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(str(ROOT / folder), version_base=None):
        return compose(name, overrides=list(overrides), return_hydra_config=True)


@pytest.mark.parametrize("folder, name", [
    ("configs/cpu", "demo"),
    ("configs", "hadw/experiments/hadw_t1_qwen3_4b_grpo_hadw"),
    ("configs", "dgpo/experiments/dgpo_t1_dgpo"),
])
def test_every_shipped_config_names_the_start_up_check(monkeypatch, folder, name):
    from verl_hadw.verl.startup_check import TARGET

    monkeypatch.setenv("VERL_HADW_ASSETS", "/nonexistent")
    cfg = composed(name, folder=folder)
    assert cfg.hydra.callbacks.verl_hadw._target_ == TARGET
    assert cfg.trainer.checkpoint_callback_class == CALLBACK  # on 0.9.1 both check: the hook before Ray


def test_the_start_up_check_stops_a_bad_config_before_ray_without_the_hook(monkeypatch, no_hook):
    from verl_hadw.verl.startup_check import StartupCheck

    monkeypatch.setenv("VERL_HADW_ASSETS", "/nonexistent")
    bad = composed("demo", "algorithm.adv_estimator=gdpo", "+algorithm.dgpo.temperature=2.0", folder="configs/cpu")
    with pytest.raises(SystemExit) as info:  # Hydra turns an Exception of a callback into a warning
        StartupCheck().on_job_start(bad)
    assert str(info.value).startswith("verl-hadw start-up check (hydra.callbacks.verl_hadw): ConfigError: "
                                      "algorithm.adv_estimator=gdpo with algorithm.dgpo.temperature set: did you mean")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        StartupCheck().on_job_start(composed("demo", folder="configs/cpu"))
    said = [str(w.message) for w in caught if "is ignored" in str(w.message)]
    assert len(said) == 1 and "(checked at start-up)" in said[0]


@pytest.mark.verl091
def test_the_start_up_check_stops_a_bad_config_before_ray_where_the_callback_checks_too(monkeypatch):
    """On 0.9.1 the callback checks again in verl's driver (a Ray actor): the start-up check stops the run before Ray,
    and leaves the warnings to the callback (said once, there)."""
    from verl_hadw.verl.startup_check import StartupCheck, callback_will_check

    monkeypatch.setenv("VERL_HADW_ASSETS", "/nonexistent")
    bad = composed("demo", "+algorithm.hadw.lamda_scale=1.3", folder="configs/cpu")
    assert callback_will_check(bad)
    with pytest.raises(SystemExit, match="Did you mean 'algorithm.hadw.lambda_scale'"):
        StartupCheck().on_job_start(bad)
    unused = composed("demo", "+algorithm.dgpo.temperature=2.0", folder="configs/cpu")  # hadw over grpo: unread
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        StartupCheck().on_job_start(unused)
    assert not caught, [str(w.message) for w in caught]
    without = composed("demo", "+algorithm.dgpo.temperature=2.0", "trainer.checkpoint_callback_class=null",
                       folder="configs/cpu")
    assert not callback_will_check(without)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        StartupCheck().on_job_start(without)  # no callback: the start-up check says it
    assert any("algorithm.dgpo.temperature" in str(w.message) for w in caught), [str(w.message) for w in caught]
