"""Greedy and sampled benchmarks in one verl validation pass: a per-prompt greedy agent loop.

verl 0.9.1 decodes a validation pass with one ``rollout.val_kwargs`` but picks the agent loop per dataset row
(``agent_name``): rows naming ``greedy_single_turn_agent`` are decoded at temperature 0, the others sample at
``val_kwargs``. The HA-DW configs load it through ``actor_rollout_ref.model.external_lib`` (docs/reproduce.md).
"""

from __future__ import annotations

from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, register
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop

from verl_hadw.repro.catalogue import GREEDY_AGENT

__all__ = ["GreedySingleTurnAgentLoop", "greedy"]


def greedy(sampling_params: dict[str, Any]) -> dict[str, Any]:
    """``sampling_params`` with verl's own greedy settings (``apply_greedy_sampling_params``), others kept."""
    return {**sampling_params, "temperature": 0, "top_p": 1.0, "top_k": -1}


# verl's agent-loop registry is per process; ``external_lib`` is imported wherever verl builds the model config,
# every agent-loop worker included, before its first rollout
@register(GREEDY_AGENT)
class GreedySingleTurnAgentLoop(SingleTurnAgentLoop):
    """verl's single-turn loop, decoding greedily whatever the pass's sampling parameters are."""

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        return await super().run(greedy(sampling_params), **kwargs)
