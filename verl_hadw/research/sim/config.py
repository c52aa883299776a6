"""``SimConfig``: the settings shared by every method of one simulation (pure Python, imported by the CLI)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SimConfig"]


@dataclass(frozen=True)
class SimConfig:
    """Everything that is the same for all methods of one simulation."""

    steps: int = 150
    prompts: int = 2048  # training population
    heldout: int = 512  # never trained on: only the shared skill s reaches them
    batch_prompts: int = 128  # prompts per step (the paper: 256)
    response_length: int = 16  # L of the (N, L) tensors
    min_response_length: int = 4
    pad_divisor: int = 24  # verl pads the batch to a multiple of lcm(dp, mini-batch sizes)
    difficulty_mean: float = -1.0  # initial logits z0 ~ N(mean, std²)
    difficulty_std: float = 2.0
    lr_prompt: float = 0.5
    lr_skill: float = 0.03
    optimizer: str = "sgd"  # sgd | rms (scale-invariant, like AdamW: a constant factor on all advantages cancels)
    rms_beta: float = 0.99  # EMA of the squared gradient norm (rms)
    # rms: the update is lr·ref·g/sqrt(EMA ||g||²) per parameter block; ref = GRPO's mean gradient norm over its
    # first 40 steps at the default config (u: 3.7, s: 34.5), so rms and sgd take the same early GRPO steps.
    rms_ref_prompt: float = 3.7
    rms_ref_skill: float = 34.5

    def __post_init__(self):
        if self.optimizer not in ("sgd", "rms"):
            raise ValueError(f"optimizer must be 'sgd' or 'rms', got {self.optimizer!r}")
        if self.batch_prompts > self.prompts:
            raise ValueError(f"batch_prompts={self.batch_prompts} exceeds the population ({self.prompts})")
        if not 1 <= self.min_response_length <= self.response_length:
            raise ValueError("need 1 <= min_response_length <= response_length")

    @property
    def mean_length(self) -> float:
        return (self.min_response_length + self.response_length) / 2
