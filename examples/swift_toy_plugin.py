"""The toy task's verifiable reward for ms-swift (``--external_plugins examples/swift_toy_plugin.py --reward_funcs
toy_accuracy``): 1.0 when the completion's first non-blank character is one of the row's allowed characters (its
``solution`` column), else 0.0. ``verl_hadw.toy.swift_data`` writes the prompts as swift's JSONL."""

from swift.rewards import ORM, orms

from verl_hadw.toy.task import compute_score


class ToyAccuracy(ORM):
    def __call__(self, completions, solution, **kwargs) -> list[float]:
        return [compute_score("toy", completion, allowed) for completion, allowed in zip(completions, solution)]


orms["toy_accuracy"] = ToyAccuracy
