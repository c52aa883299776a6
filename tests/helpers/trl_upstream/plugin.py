"""pytest plugin (``-p plugin``) for running TRL's ``tests/test_grpo_trainer.py`` on local stand-ins, with TRL's
trainer or with ``HadwGRPOTrainer``: ``run.py`` loads it. Environment:

- ``TRL_UPSTREAM_TRAINER``: ``trl`` (TRL's ``GRPOTrainer``/``GRPOConfig``) or ``hadw`` (the test module's names
  ``GRPOTrainer`` and ``GRPOConfig`` are ours for every test: ``HadwGRPOTrainer``, and ``HadwGRPOConfig`` with
  ``hadw_success_threshold`` given, as a user with non-binary rewards writes it);
- ``TRL_UPSTREAM_STANDINS``: the folder ``standins.build`` wrote (the Hub cache is set up by ``run.py``).

Same for both trainers: ``load_dataset`` in the test module reads the stand-in datasets; a test naming a Hub model or
dataset without a stand-in (vision-language models) is skipped with the names; names that TRL's ``testing_utils``
imports from ``trl.import_utils`` but this TRL lacks (a test helper newer or older than the release) are added as
"is the module importable" checks.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import re
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from standins import load_dataset_from  # noqa: E402

TRAINER = os.environ.get("TRL_UPSTREAM_TRAINER", "trl")
STANDINS = Path(os.environ.get("TRL_UPSTREAM_STANDINS", ""))
THRESHOLD = float(os.environ.get("TRL_UPSTREAM_THRESHOLD", "0.5"))
HUB_ID = re.compile(r"""["']((?:trl-internal-testing|Qwen|HuggingFaceTB|google|meta-llama)/[A-Za-z0-9_.\-]+)["']""")


def _add_missing_import_utils(tests_dir: Path) -> None:
    """Make ``from trl.import_utils import is_x_available`` of TRL's ``testing_utils`` importable on any 1.x."""
    import trl.import_utils as iu

    source = (tests_dir / "testing_utils.py").read_text()
    block = re.search(r"from trl\.import_utils import \(([^)]*)\)", source)
    names = re.findall(r"is_(\w+)_available", block.group(1)) if block else []
    for name in names:
        if not hasattr(iu, f"is_{name}_available"):
            setattr(iu, f"is_{name}_available", lambda m=name: importlib.util.find_spec(m) is not None)


def pytest_configure(config):
    import torch

    torch.set_num_threads(1)
    tests_dir = Path(str(config.rootpath)) / "tests"
    if (tests_dir / "testing_utils.py").exists():
        _add_missing_import_utils(tests_dir)
    config.addinivalue_line("markers", "hadw_ci: the upstream tests CI runs (run.py --subset ci)")


def _hub_ids(item) -> set[str]:
    """The Hub ids a test names: in its body (not the decorators' other parameters) and in its parameters."""
    fn = getattr(item, "function", None)
    ids = set()
    if fn is not None:
        try:
            source = inspect.getsource(fn)
        except (OSError, TypeError):
            source = ""
        body = source[source.find("def ") :]
        ids |= set(HUB_ID.findall(body))
    params = getattr(getattr(item, "callspec", None), "params", {})
    ids |= {v for v in params.values() if isinstance(v, str) and HUB_ID.fullmatch(f'"{v}"')}
    return ids


def base_and_params(test_id: str) -> tuple[str, set[str]]:
    """``test_training_x[a-b]`` -> (``test_train_x``, {a, b}): TRL's 1.0-1.6 tests say ``test_training_*``."""
    name = test_id.split("::")[-1]
    base, _, params = name.partition("[")
    return base.replace("test_training", "test_train", 1), set(params.rstrip("]").split("-")) - {""}


def matches(selector: str, test_id: str) -> bool:
    """``test_train_x`` selects every parameter set; ``test_train_x[a]`` those whose id has ``a`` and no ``True``
    (the Liger-kernel variants, skipped without liger-kernel)."""
    (sel_base, sel_params), (base, params) = base_and_params(selector), base_and_params(test_id)
    return sel_base == base and (not sel_params or (sel_params <= params and "True" not in params))


def pytest_collection_modifyitems(config, items):
    import json

    record = json.loads((STANDINS / "done.json").read_text())
    have = set(record["models"]) | set(record["datasets"])
    ci = set(os.environ.get("TRL_UPSTREAM_CI", "").split())
    for item in items:
        if any(matches(selector, item.name) for selector in ci):
            item.add_marker(pytest.mark.hadw_ci)
        missing = sorted(i for i in _hub_ids(item) if i not in have)
        if missing:
            item.add_marker(pytest.mark.skip(reason=f"no local stand-in for {', '.join(missing)}"))


if TRAINER == "hadw":
    from verl_hadw.trl import HadwGRPOConfig, HadwGRPOTrainer

    class GRPOConfig(HadwGRPOConfig):
        """``HadwGRPOConfig`` as a user with non-binary rewards writes it: ``hadw_success_threshold`` given.
        (At module level: TRL pickles the config into each checkpoint's ``training_args.bin``.)"""

        def __init__(self, *args, **kwargs):
            kwargs.setdefault("hadw_success_threshold", THRESHOLD)
            super().__init__(*args, **kwargs)


@pytest.fixture(autouse=True)
def _cpu_without_accelerator(monkeypatch):
    """``use_cpu=True`` on every config when no GPU is present (TRL's tests from 1.10 do the same in their conftest;
    before, TRL's default ``bf16=True`` makes transformers refuse a CPU-only machine)."""
    import torch
    from transformers import TrainingArguments

    if torch.cuda.is_available():
        return
    original = TrainingArguments.__post_init__

    def post_init(self):
        self.use_cpu = True
        original(self)

    monkeypatch.setattr(TrainingArguments, "__post_init__", post_init)


@pytest.fixture(autouse=True)
def _upstream_names(request, monkeypatch):
    module = request.module
    if hasattr(module, "load_dataset"):
        monkeypatch.setattr(module, "load_dataset", load_dataset_from(STANDINS))
    if TRAINER == "hadw" and hasattr(module, "GRPOTrainer"):
        monkeypatch.setattr(module, "GRPOTrainer", HadwGRPOTrainer)
        monkeypatch.setattr(module, "GRPOConfig", GRPOConfig)
    yield
