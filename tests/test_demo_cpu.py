"""The CPU demo learns: ``scripts/demo_cpu.sh``'s run (configs/cpu/demo.yaml, default data.seed) through verl's
real ``main_ppo``, read from its console log; and it writes its PNG (about 3 minutes)."""

import subprocess
import sys

import pytest

from verl_hadw.console_log import parse_steps
from verl_hadw.toy.plot import rise

pytestmark = pytest.mark.slow


def test_demo_reward_rises_and_the_png_is_written(tmp_path):
    log, png = tmp_path / "main_ppo.log", tmp_path / "demo.png"
    cmd = [sys.executable, "-m", "verl_hadw.toy.launch", "--assets", str(tmp_path / "assets"), "--log", str(log),
           "--plot", str(png), "--", f"trainer.default_local_dir={tmp_path / 'checkpoints'}"]
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    steps = parse_steps(log.read_text())
    assert sorted(steps) == list(range(1, 31))  # the demo's 30 steps
    first, last = rise(steps)
    assert last - first >= 0.15, (first, last)
    assert f"steps 1-5 {first:.3f}, last 5 steps {last:.3f}" in out.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
