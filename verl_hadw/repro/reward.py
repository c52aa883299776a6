"""Rule-based math reward of the paper reproductions (verl's ``reward.custom_reward_function``; docs/reproduce.md).

The configs name ``pkg://verl_hadw.repro.reward`` / ``compute_score``, with ``reward_kwargs``: ``backend`` (``auto``:
verl's MATH checker for MATH-style sources, math-verify for the rest; or ``verl_math`` / ``math_verify``) and
``signed`` (+1/-1 for DAPO). Returns ``score`` and ``acc``, and on MATH500 the accuracy by level.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BACKENDS", "VERL_MATH_SOURCES", "backend_for", "compute_score", "level_band"]

BACKENDS = ("auto", "verl_math", "math_verify")
# Sources whose gold answers follow MATH's LaTeX conventions: verl's MATH checker fits them (and the HA-DW authors'
# verl fork scored MATH and AMC-23 with it); math-verify is better elsewhere (docs/reproduce.md, "Reward").
VERL_MATH_SOURCES = frozenset({"math_train", "math500", "aime24", "aime25", "amc23"})
LEVEL_SOURCES = frozenset({"math500"})


def backend_for(data_source: str, backend: str = "auto") -> str:
    """The checker used for ``data_source`` under ``backend``."""
    if backend not in BACKENDS:
        raise ValueError(
            f"reward.custom_reward_function.reward_kwargs.backend={backend!r} is not valid; choose one of: "
            + ", ".join(BACKENDS)
        )
    if backend != "auto":
        return backend
    return "verl_math" if data_source in VERL_MATH_SOURCES else "math_verify"


def level_band(level: int) -> str:
    """HA-DW §5.1 / Fig. 1(c): Easy = level 1, Mid = levels 2-3, Hard = levels 4-5."""
    return "easy" if level <= 1 else ("mid" if level <= 3 else "hard")


def _correct(backend: str, solution_str: str, ground_truth: str) -> bool:
    if backend == "verl_math":
        from verl.utils.reward_score import math_reward

        return math_reward.compute_score(solution_str, ground_truth) >= 1.0
    from verl.utils.reward_score import math_verify

    return math_verify.compute_score(solution_str, ground_truth) >= 1.0


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    backend: str = "auto",
    signed: bool = False,
    **kwargs,
) -> dict[str, float]:
    """Score one response. Returns ``{"score", "acc"[, "acc_level<k>", "acc_<band>"]}``."""
    if not isinstance(signed, bool):
        raise ValueError(f"reward.custom_reward_function.reward_kwargs.signed must be true or false, got {signed!r}")
    checker = backend_for(data_source, backend)
    if ground_truth is None or str(ground_truth).strip() == "":
        raise ValueError(f"{data_source}: empty reward_model.ground_truth; re-run `verl-hadw data` on this dataset")
    correct = _correct(checker, solution_str or "", str(ground_truth))
    result = {"score": (1.0 if correct else -1.0) if signed else float(correct), "acc": float(correct)}
    level = (extra_info or {}).get("level") if data_source in LEVEL_SOURCES else None
    if isinstance(level, (int, float)) and 1 <= int(level) <= 5:
        # Only the streaming reward path (no colocated reward model, as in these configs) accepts per-row keys.
        result[f"acc_level{int(level)}"] = float(correct)
        result[f"acc_{level_band(int(level))}"] = float(correct)
    return result
