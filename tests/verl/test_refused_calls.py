"""A call that raises leaves the anchor exactly as it was: every refusal of the estimators, swept.

Each case refuses one call at step 2 of a three-step run, between step 1 and step 2's good call: the anchor's state
and its (step, call) ids are equal before and after the refused call, nothing is logged for it, and the run then
goes on bit for bit as a run that never saw it. The sweep covers every ``raise`` of the estimators' input checks
and equations (``groups``, ``advantages``: a new one without a case fails
``test_the_sweep_reaches_every_refusal``), for verl's ``hadw`` (over GRPO and DGPO) and ``dgpo``, and TRL's trainer.
"""

import ast
import traceback
from pathlib import Path

import numpy as np
import pytest
import torch
from batches import algo, make_inputs
from repo_paths import ROOT
from verl.utils.skip.skip_manager import SkipManager

from verl_hadw.verl import metrics, process_state
from verl_hadw.verl.estimators import compute_dgpo_outcome_advantage as dgpo
from verl_hadw.verl.estimators import compute_hadw_outcome_advantage as hadw
from verl_hadw.verl.process_state import PROCESS

CHECKED = ("verl_hadw/core/groups.py", "verl_hadw/core/advantages.py")


def good(step):
    """Step ``step``'s batch: two groups of four, accuracies that move from step to step."""
    scores = [[1, 0, 0, 0, 1, 1, 1, 0], [1, 1, 0, 0, 1, 1, 1, 1], [0, 0, 0, 1, 1, 0, 1, 1]][step - 1]
    rewards, mask, index = make_inputs(scores, ["a"] * 4 + ["b"] * 4)
    return {"token_level_rewards": rewards, "response_mask": mask, "index": index}


def edit(**changes):
    """A refused batch: step 2's good batch with ``changes`` (values, or functions of the good batch)."""
    def make():
        batch = good(2)
        batch.update({k: v(batch) if callable(v) else v for k, v in changes.items()})
        return batch
    return make


def _set(name, rows, cols, value, dtype=None):
    def fn(batch):
        t = batch[name].to(dtype) if dtype is not None else batch[name].clone()
        t[rows, cols] = value
        return t
    return fn


REWARD = {"difficulty_from": "reward", "dgpo": {"dqw": False}}  # DQW would refuse rewards of 500 first
# name: (refused batch, expected message, the run's algorithm options)
CASES = {
    "rewards-not-a-tensor": (edit(token_level_rewards=lambda b: b["token_level_rewards"].tolist()), "must be a torch"),
    "complex-rewards": (edit(token_level_rewards=lambda b: b["token_level_rewards"] * 1j), "complex dtype"),
    "one-dimensional-rewards": (edit(token_level_rewards=lambda b: b["token_level_rewards"].sum(-1),
                                     response_mask=lambda b: b["response_mask"].sum(-1)), "must be 2-D"),
    "mask-shape": (edit(response_mask=lambda b: b["response_mask"][:, :5]), "response_mask has shape"),
    "mask-device": (edit(response_mask=lambda b: torch.empty(b["response_mask"].shape, device="meta")), "one device"),
    "no-response-tokens": (edit(token_level_rewards=lambda b: b["token_level_rewards"][:, :0],
                                response_mask=lambda b: b["response_mask"][:, :0]), "response_length is 0"),
    "index-of-pairs": (edit(index=[(i // 4, i) for i in range(8)]), r"index has shape \(8, 2\)"),
    "index-too-short": (edit(index=lambda b: b["index"][:7]), "index has 7 entries"),
    "no-index": (edit(index=None), "got no 'index'"),
    "empty-batch": (edit(token_level_rewards=torch.zeros(0, 6), response_mask=torch.zeros(0, 6), index=[]), "empty"),
    "all-padding": (edit(response_mask=lambda b: torch.zeros_like(b["response_mask"])), "all padding"),
    "mask-outside-0-1": (edit(response_mask=_set("response_mask", 3, 0, 2.0)), r"outside \[0, 1\]"),
    "nan-reward": (edit(token_level_rewards=_set("token_level_rewards", 3, 5, float("nan"))), "non-finite"),
    "fp16-sum-overflow": (edit(token_level_rewards=_set("token_level_rewards", 3, [0, 1], 40000.0, torch.half)),
                          "overflows torch.float16"),
    "float32-statistics-overflow": (edit(token_level_rewards=_set("token_level_rewards", [0, 1], 5, 1e30)),
                                    "too large for the float32 group statistics"),
    "ragged-labels": (edit(index=[np.zeros((2, 2))] * 4 + [np.zeros((2, 3))] * 4), "one scalar label per row"),
    "nan-label": (edit(index=np.array([0.5] * 4 + [np.nan] * 4)), "NaN, unequal to itself"),
    "complex-label": (edit(index=torch.tensor([1j] * 4 + [2j] * 4)), "group labels must be real"),
    "non-binary-accuracy": (edit(token_level_rewards=_set("token_level_rewards", 3, 5, 0.5)), "not binary"),
    "phi-overflow": (edit(token_level_rewards=lambda b: b["token_level_rewards"] * 500), "overflows float32", REWARD),
}
BASES = {"hadw/grpo": (hadw, {}), "hadw/dgpo": (hadw, {"base": "dgpo"}), "dgpo": (dgpo, {})}


def anchors():
    """Everything the anchors of this process hold: each client's state and its (step, call) ids."""
    return {key: (c.state_dict(), c._step, c._call) for key, c in PROCESS.anchors.items()}


def run(fn, config, refused=None):
    """Steps 1-3 (one good call each); ``refused``: (batch, message) tried first at step 2. Rows of every step."""
    process_state.reset()
    rows = []
    for step in (1, 2, 3):
        SkipManager.set_step(step)
        if step == 2 and refused is not None:
            before = anchors()
            with pytest.raises((ValueError, TypeError), match=refused[1]):
                fn(**refused[0](), config=config)
            assert anchors() == before, "the refused call moved the anchor"
            assert metrics.pop(step) == {}, "the refused call logged metrics"
        adv, _ = fn(**good(step), config=config)
        rows.append((adv.tolist(), sorted(metrics.pop(step).items()), anchors()))
    return rows


SWEEP = [(case, base) for case in CASES for base in BASES if not (case == "phi-overflow" and base == "dgpo")]


@pytest.mark.parametrize("case, base", SWEEP)
def test_a_refused_call_leaves_the_anchor_as_it_was_and_the_run_goes_on_unchanged(case, base):
    make, message, *options = CASES[case]
    fn, hadw_options = BASES[base]
    config = algo("hadw" if fn is hadw else "dgpo", state_key="sweep", **hadw_options, **(options or [{}])[0])
    refused, clean = run(fn, config, refused=(make, message)), run(fn, config)
    assert refused == clean
    assert fn is dgpo or clean[-1][2]["sweep"][0]["open_step"] == 3  # the anchor did take the good calls


def raise_sites() -> set[tuple[str, int]]:
    """(file, line) of every ``raise`` with an exception in the checked modules."""
    sites = set()
    for name in CHECKED:
        for node in ast.walk(ast.parse((ROOT / name).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                sites.add((name, node.lineno))
    return sites


def site_of(error: BaseException) -> tuple[str, int]:
    """The innermost frame of ``error``'s traceback in a checked module, as the line of its ``raise``."""
    frames = [(str(Path(f.filename).resolve().relative_to(ROOT)), f.lineno) for f in traceback.extract_tb(
        error.__traceback__) if Path(f.filename).resolve().is_relative_to(ROOT)]
    name, line = [f for f in frames if f[0] in CHECKED][-1]
    starts = sorted(line_ for file, line_ in raise_sites() if file == name and line_ <= line)
    return name, starts[-1]


def test_the_sweep_reaches_every_refusal():
    reached = set()
    for case, base in SWEEP:
        make, message, *options = CASES[case]
        fn, hadw_options = BASES[base]
        config = algo("hadw" if fn is hadw else "dgpo", state_key="sites", **hadw_options, **(options or [{}])[0])
        process_state.reset()
        SkipManager.set_step(1)
        fn(**good(1), config=config)
        SkipManager.set_step(2)
        with pytest.raises((ValueError, TypeError)) as info:
            fn(**make(), config=config)
        reached.add(site_of(info.value))
    missing = raise_sites() - reached
    assert not missing, f"refused calls without a case in CASES (add one, so the anchor invariant is tested): {missing}"


# ------------------------------------------------------------------------------------------------ TRL
TRL_CASES = {  # (gathered rewards of one generation batch, expected message, HadwGRPOConfig overrides)
    "inf-reward": (lambda r: r.index_put_((torch.tensor([3]),), torch.tensor(float("inf"))), "infinite value", {}),
    "non-binary-accuracy": (lambda r: r.index_put_((torch.tensor([3]),), torch.tensor(0.5)), "not binary", {}),
    "phi-overflow": (lambda r: r * 500, "overflows float32", {"hadw_difficulty_from": "reward"}),
}


@pytest.mark.parametrize("case", list(TRL_CASES))
def test_trl_a_refused_generation_leaves_the_anchor_as_it_was(tmp_path, case):
    from trl_helpers import config, trainer

    breaker, message, overrides = TRL_CASES[case]
    batches = [torch.tensor([[float(v)] for v in good(step)["token_level_rewards"].sum(-1)]) for step in (1, 2, 3)]
    lengths = torch.full((8,), 6)

    def steps(t, refused):
        t.hadw_anchor.start(None)
        out = []
        for step, rewards in enumerate(batches, start=1):
            t.state.global_step = step - 1
            if step == 2 and refused:
                before = (t.hadw_anchor.state.to_dict(), t.hadw_anchor._last)
                with pytest.raises(ValueError, match=message):
                    t.hadw_advantages(breaker(rewards.clone()), lengths)
                assert (t.hadw_anchor.state.to_dict(), t.hadw_anchor._last) == before
            adv, values = t.hadw_advantages(rewards, lengths)
            out.append((adv.tolist(), sorted(values.items()), t.hadw_anchor.state.to_dict()))
        return out

    t = trainer(config(tmp_path, **overrides))
    assert steps(t, refused=True) == steps(t, refused=False)
