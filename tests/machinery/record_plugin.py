"""A test plugin for ms-swift (``--external_plugins``): records what ``HadwSwiftGRPOTrainer`` computed at every call
into ``$SWIFT_CELL_RECORDS/rank<R>.jsonl`` (the process's rank): the step, the gathered rewards, the advantages it
handed swift (every process's rows) and the anchor after the call. It wraps the real method once and changes
nothing it returns."""

import json
import os

from verl_hadw.swift_adapter.grpo_trainer import HadwSwiftGRPOTrainer

if not getattr(HadwSwiftGRPOTrainer, "_recorded", False):
    _compute = HadwSwiftGRPOTrainer._compute_advantages

    def _recording(self, samples, rewards_per_func, batch_encoded_inputs):
        advantages = _compute(self, samples, rewards_per_func, batch_encoded_inputs)
        folder = os.environ.get("SWIFT_CELL_RECORDS")
        if folder:
            anchor = self.hadw_anchor.state.to_dict() if self.hadw_anchor is not None else None
            row = {"rank": self.accelerator.process_index, "step": self.state.global_step + 1,
                   "training": bool(self.model.training), "rewards": rewards_per_func.tolist(),
                   "lengths": self._loss_tokens(batch_encoded_inputs).tolist(), "advantages": advantages.tolist(),
                   "anchor": anchor}
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, f"rank{self.accelerator.process_index}.jsonl"), "a") as f:
                f.write(json.dumps(row) + "\n")
        return advantages

    HadwSwiftGRPOTrainer._compute_advantages = _recording
    HadwSwiftGRPOTrainer._recorded = True
