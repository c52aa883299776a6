"""Every Python example of docs/trl.md runs as written: each block is executed with the names it leaves to the
reader (``model``, ``tokenizer``, ``dataset``, ``accuracy``, ``style``) bound to the CPU demo's tiny local Qwen2, one
toy prompt, the toy task's 0/1 accuracy and a style reward that is not 0/1.

The examples use TRL's defaults, which train in bf16: transformers accepts that only beside a GPU, so here it is
told bf16 is available and torch runs the bf16 autocast on the CPU (TRL's own defaults need the same on a CPU).
"""

from __future__ import annotations

import re

import pytest
from repo_paths import ROOT

BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def examples() -> list[str]:
    return BLOCK.findall((ROOT / "docs" / "trl.md").read_text(encoding="utf-8"))


def style(completions, **kwargs) -> list[float]:
    """Not an accuracy: 0.5 for a completion of at most 4 characters, else 0."""
    return [0.5 if len(c[0]["content"]) <= 4 else 0.0 for c in completions]


def test_the_page_has_examples():
    assert examples(), "docs/trl.md shows no ```python example"


@pytest.mark.slow  # TRL's default config: 256-token completions, 3 epochs (of one prompt here)
@pytest.mark.parametrize("number", range(len(examples())))
def test_example_runs_as_written(tmp_path, monkeypatch, number):
    import transformers.training_args
    from trl_helpers import accuracy, toy_dataset

    from verl_hadw.toy.model import build_model, build_tokenizer

    monkeypatch.setattr(transformers.training_args, "is_torch_bf16_gpu_available", lambda: True)
    monkeypatch.chdir(tmp_path)
    tokenizer = build_tokenizer()
    names = {"model": build_model(tokenizer, 0), "tokenizer": tokenizer, "dataset": toy_dataset(1),
             "accuracy": accuracy, "style": style}
    exec(compile(examples()[number], f"docs/trl.md example {number + 1}", "exec"), names)
    trainer = names["trainer"]
    assert trainer.state.global_step >= 1
    assert any("hadw/phi_mean" in entry or "dgpo/valid_groups" in entry for entry in trainer.state.log_history)
