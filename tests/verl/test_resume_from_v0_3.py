"""An anchor file written by verl-hadw 0.3 resumes exactly under this version.

``tests/helpers/fixtures/anchor_v0_3`` is a v1 checkpoint folder as 0.3's callback left it (written by the code of
d39b795, before the core/adapter split: ``CheckpointFiles.on_checkpoint`` after six steps of two calls each). This
version's checkpoint back-end restores it, and the anchor continues exactly as an uninterrupted run of this version.
"""

import json
import shutil

from omegaconf import OmegaConf
from repo_paths import FIXTURES

from verl_hadw.core.anchor import AnchorState
from verl_hadw.verl.anchor_store.checkpoint_files import CheckpointFiles
from verl_hadw.verl.config.run_options import parse_run

FIXTURE = FIXTURES / "anchor_v0_3"
ALGORITHM = {"adv_estimator": "hadw", "norm_adv_by_std_in_grpo": True,
             "hadw": {"state_key": "fixture/v0.3", "anchor": {"eta": 3.0, "window": 3}}}


def observe(state: AnchorState, steps) -> list:
    """The inputs the fixture was written with, continued: (5t + 3·call) mod 17 correct of 24, two calls a step."""
    return [state.observe(t, call, (5 * t + 3 * call) % 17, 24) for t in steps for call in range(2)]


def test_a_v0_3_anchor_file_resumes_and_continues_bit_for_bit(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "ckpt")
    algorithm = OmegaConf.create(ALGORITHM)
    cfg = parse_run(algorithm).hadw
    trainer = OmegaConf.create({"resume_mode": "auto", "default_local_dir": str(tmp_path / "ckpt"),
                                "resume_from_path": None})
    backend = CheckpointFiles(trainer, parse_run(algorithm).flat())
    restored = backend.load(cfg, 7)
    assert backend.restored_step == 6 and backend.first_step == 7
    saved = json.loads((FIXTURE / "global_step_6" / "verl_hadw_anchor.json").read_text())
    assert saved["state"]["schema_version"] == 2 and saved["state"]["open_step"] == 6  # as 0.3 wrote it

    straight = AnchorState(config=cfg.anchor)
    observe(straight, range(1, 7))
    resumed = AnchorState.from_dict(restored, cfg.anchor)
    assert resumed.to_dict() == straight.to_dict()
    assert observe(resumed, range(7, 13)) == observe(straight, range(7, 13))  # every view: prior, y_t, eta_t, ...
    assert resumed.to_dict() == straight.to_dict()
