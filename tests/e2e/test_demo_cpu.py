"""The CPU demo learns: ``scripts/demo_cpu.sh``'s run (``verl_hadw.toy.launch --demo``: configs/cpu/demo.yaml,
default data.seed) through verl's real ``main_ppo``, read from its console log; it writes its PNG and its
checkpoints, and its sampling draws afresh at every step. The run is the session's ``demo_run`` launch
(tests/helpers/launches.py), which test_e2e_cpu.py also reads."""

import pytest

from verl_hadw.core.anchor.file_format import STATE_FILE
from verl_hadw.toy.plot import rise

pytestmark = pytest.mark.slow

STEPS = 30

def test_demo_reward_rises_and_the_png_is_written(demo_run):
    assert sorted(demo_run.steps) == list(range(1, STEPS + 1))
    first, last = rise(demo_run.steps)
    assert last - first >= 0.15, (first, last)
    assert f"steps 1-5 {first:.3f}, last 5 steps {last:.3f}" in demo_run.stdout
    assert "main_ppo took " in demo_run.stdout
    png = demo_run.out / "demo.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    for step in (15, 30):  # the demo's saves, each with the anchor
        assert (demo_run.out / "checkpoints" / f"global_step_{step}" / STATE_FILE).is_file()


def test_demo_samples_with_a_new_weight_version_every_step(demo_run):
    """The hfcpu rollout seeds each draw by (prompt, copy, weight version): a prompt seen again at a later step
    must not replay its earlier draws. The weight version is the trainer step verl hands to the server with each
    weight update; verl reads it back from every response (``extra_fields["global_steps"]``) as the trajectory
    staleness, which is 0 only when every response of step t was drawn at version t - 1. A server stuck at
    version 0 would show a staleness of t - 1 and repeat its seeds every time a prompt came back (that a new
    version draws new seeds for the same prompt: test_e2e_cpu.py::test_sample_seeds_do_not_depend_on_arrival_order).
    """
    for step, values in demo_run.steps.items():
        assert values["training/off_policy/trajectory_staleness/max"] == 0, step
        assert values["training/off_policy/trajectory_staleness_worst/max"] == 0, step
