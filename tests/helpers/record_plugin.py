"""A test plugin for ms-swift (``--external_plugins``): records what ``HadwSwiftGRPOTrainer`` computed at every call
into ``$SWIFT_ENV_RECORDS/rank<R>.jsonl`` (the process's rank): the step, the gathered rewards, the loss tokens the
adapter read (``lengths``), the advantages it handed swift (every process's rows) and the anchor after the call; and
what swift itself holds, read here without the adapter: this process's completions and their ``solution`` column,
each completion's loss tokens in swift's own masks (``mask_tokens``) and swift's ``num_items_in_batch``, the count
its token-mean losses divide by. It wraps the real method once and changes nothing it returns."""

import json
import os

from verl_hadw.swift.grpo_trainer import HadwSwiftGRPOTrainer


def _completion_and_solution(sample) -> tuple[str, str | None]:
    """A sample's completion and ``solution`` as swift's reward functions read them (4.6: ``GRPOSample``; 4.3-4.5:
    dicts, whose assistant content swift's encoding later turns into token ids)."""
    if isinstance(sample, dict):
        return sample["messages"][-1]["content"], sample.get("solution")
    return sample.messages[-1]["content"], sample.extra.get("solution")


def swifts_own(trainer, batch_encoded_inputs) -> dict:
    """What swift holds for this process's rows: the completions and solutions its reward functions scored, loss tokens
    per completion in its masks, and its ``num_items_in_batch`` (every process's tokens)."""
    grpo = [b["grpo_batch"] if "grpo_batch" in b else None for b in batch_encoded_inputs]
    masks = [g.completion_mask if g is not None else b["completion_mask"] for g, b in zip(grpo, batch_encoded_inputs)]
    counts = [g.num_items_in_batch if g is not None else b["num_items_in_batch"]
              for g, b in zip(grpo, batch_encoded_inputs)]
    scored = getattr(trainer, "_recorded_scored", [])
    completions, solutions = zip(*scored) if scored else ((), ())
    return {"completions": list(completions), "solutions": list(solutions),
            "mask_tokens": [int(n) for m in masks for n in m.sum(1).tolist()],
            "num_items_in_batch": [float(c) for c in counts]}


if not getattr(HadwSwiftGRPOTrainer, "_recorded", False):
    _compute = HadwSwiftGRPOTrainer._compute_advantages
    _score = HadwSwiftGRPOTrainer._compute_rewards_per_func

    def _scoring(self, samples):
        self._recorded_scored = [_completion_and_solution(s) for s in samples]  # as the reward functions read them
        return _score(self, samples)

    def _recording(self, samples, rewards_per_func, batch_encoded_inputs):
        advantages = _compute(self, samples, rewards_per_func, batch_encoded_inputs)
        folder = os.environ.get("SWIFT_ENV_RECORDS")
        if folder:
            anchor = self.hadw_anchor.state.to_dict() if self.hadw_anchor is not None else None
            row = {"rank": self.accelerator.process_index, "step": self.state.global_step + 1,
                   "training": bool(self.model.training), "rewards": rewards_per_func.tolist(),
                   "lengths": self._loss_tokens(batch_encoded_inputs).tolist(), "advantages": advantages.tolist(),
                   "anchor": anchor, **swifts_own(self, batch_encoded_inputs)}
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, f"rank{self.accelerator.process_index}.jsonl"), "a") as f:
                f.write(json.dumps(row) + "\n")
        return advantages

    HadwSwiftGRPOTrainer._compute_advantages = _recording
    HadwSwiftGRPOTrainer._compute_rewards_per_func = _scoring
    HadwSwiftGRPOTrainer._recorded = True
