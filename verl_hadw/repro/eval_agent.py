"""Greedy and sampled benchmarks in one verl validation pass: a per-prompt greedy agent loop.

verl 0.9.1 decodes a validation pass with one set of sampling parameters, ``rollout.val_kwargs`` (temperature,
top-p, top-k; ``do_sample`` is not read by the agent-loop rollout), but it picks the agent loop and the sample
count per prompt from the dataset row (``agent_name``, ``__rollout_n__``). ``greedy_single_turn_agent`` is verl's
``single_turn_agent`` with temperature 0 / top-p 1 / top-k -1, so evaluation rows that name it are decoded
greedily while the others sample at ``val_kwargs`` (docs/reproduce.md, "Evaluation protocol", cites the verl
lines). Training rows carry no ``agent_name`` and keep verl's default loop.

Registration: verl looks agent loops up in a per-process registry filled by ``@register``; the HA-DW configs list
this module in ``actor_rollout_ref.model.external_lib``, which verl imports wherever it builds the model config,
including every agent-loop worker before its first rollout.
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


@register(GREEDY_AGENT)
class GreedySingleTurnAgentLoop(SingleTurnAgentLoop):
    """verl's single-turn loop, decoding greedily whatever the pass's sampling parameters are."""

    async def run(self, sampling_params: dict[str, Any], **kwargs) -> AgentLoopOutput:
        return await super().run(greedy(sampling_params), **kwargs)
