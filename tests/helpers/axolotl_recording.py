"""``RecordingTrainer``: ``HadwAxolotlGRPOTrainer`` unchanged, recording each generation batch into
``$AXOLOTL_RECORDS/rank<R>.jsonl`` (named by a test YAML's ``trainer_cls``, which the plugin accepts as a subclass of
its own): what TRL itself held, read here without the adapter (the completions its reward functions scored, their
``solution`` column, the loss tokens of its completion masks), the advantages the adapter handed TRL and the anchor."""

import json
import os

from verl_hadw.axolotl.grpo_trainer import HadwAxolotlGRPOTrainer


class RecordingTrainer(HadwAxolotlGRPOTrainer):
    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        self._scored = [(c[0]["content"], x["solution"]) for c, x in zip(completions, inputs, strict=True)]
        return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        folder = os.environ.get("AXOLOTL_RECORDS")
        if folder and self.model.training:
            anchor = self.hadw_anchor.state.to_dict() if self.hadw_anchor is not None else None
            row = {"step": self.state.global_step + 1, "completions": [c for c, _ in self._scored],
                   "solutions": [s for _, s in self._scored],
                   "mask_tokens": [int(n) for n in output["completion_mask"].sum(1).tolist()],
                   "num_items_in_batch": float(output["num_items_in_batch"]),
                   "advantages": output["advantages"].tolist(), "anchor": anchor}
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, f"rank{self.accelerator.process_index}.jsonl"), "a") as f:
                f.write(json.dumps(row) + "\n")
        return output
