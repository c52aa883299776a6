"""A replay buffer for verl's v1 trainer that hands the trainer each batch in a canonical row order.

verl 0.9.1's v1 trainer builds a step's batch from the trajectories in TransferQueue in the order they
*finished* (its ``ReplayBuffer._materialize_batch`` walks TransferQueue's key listing). Rollouts finish in
an order set by asyncio and Ray scheduling, so the same trajectories reach the actor in a different row
order on every run. The update sums over rows in float, so two runs with the same seed drift apart in the
last bits from step 1 and, once a sampling draw lands on the other side of a threshold, in the rewards too.

``CanonicalReplayBuffer`` is verl's sync ``ReplayBuffer`` with one change (an override of verl 0.9.1's
``ReplayBuffer._materialize_batch``; ``verl_hadw.cpu`` refuses other verl versions): the selected trajectories are
sorted by content — groups (``uid``) by their prompt token ids and then their sorted responses, rows within
a group by response token ids. Rows that tie are identical in every field the update reads, so the batch
is the same tensor on every run. Plugged in through verl's own extension point (``configs/cpu/demo.yaml``):

    trainer.v1.sampler.custom_sampler.path=pkg://verl_hadw.cpu.sampler
    trainer.v1.sampler.custom_sampler.name=CanonicalReplayBuffer

It also polls TransferQueue more often. verl's buffer looks for finished groups every ``poll_interval`` = 2 s, a
wait sized for GPU batches; the CPU demo's 32 responses finish in about 1.4 s, so every step waited for the
2 s tick. The interval is a constructor argument that verl does not expose in its config, so this
buffer reads it from the custom sampler's ``sampler_kwargs`` (``trainer.v1.sampler.sampler_kwargs.poll_interval``,
seconds; default verl's 2.0). The batch does not depend on it: the sync trainer requests exactly one batch of
prompts and samples once all of them have finished.

It is for the sync trainer (``trainer.v1.trainer_mode=sync``, the default) and refuses the async modes.
verl passes a custom sampler only its base arguments, so DAPO group filtering (``algorithm.filter_groups``)
and ``sync_refill_failed_groups`` are not available with it; the CPU demo uses neither.
"""

from __future__ import annotations

from collections import defaultdict

import transfer_queue as tq
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

__all__ = ["CanonicalReplayBuffer", "canonical_order"]


def canonical_order(uids: list[str], prompts: list[tuple], responses: list[tuple]) -> list[int]:
    """Row indexes sorting a batch by content: groups by (prompt, sorted responses), rows by response.

    ``uids[i]`` is row i's group; ``prompts[i]`` / ``responses[i]`` its token ids. The result depends only
    on the multiset of (group, prompt, response) rows, not on their input order or on the uid strings
    (random per run), except between groups with the same prompt *and* the same responses, which are
    interchangeable.
    """
    rows = defaultdict(list)
    for i, uid in enumerate(uids):
        rows[uid].append(i)
    groups = []
    for members in rows.values():
        members.sort(key=lambda i: responses[i])
        groups.append(((prompts[members[0]], tuple(responses[i] for i in members)), members))
    groups.sort(key=lambda group: group[0])
    return [i for _, members in groups for i in members]


def _rows(values) -> list[tuple]:
    return [tuple(int(t) for t in row.reshape(-1).tolist()) for row in values]


class CanonicalReplayBuffer(ReplayBuffer):
    """verl's sync ``ReplayBuffer``, returning each batch sorted by content (see the module docstring)."""

    def __init__(self, trainer_mode: str, *args, **kwargs):
        if trainer_mode != "sync":
            raise ValueError(
                f"CanonicalReplayBuffer implements the sync trainer's sampling, not trainer_mode={trainer_mode!r}; "
                "set trainer.v1.sampler.custom_sampler.path=null to use verl's own async replay buffer"
            )
        super().__init__(trainer_mode, *args, **kwargs)
        options = dict(self.sampler_kwargs or {})
        key = "trainer.v1.sampler.sampler_kwargs"
        if set(options) - {"poll_interval"}:
            raise ValueError(f"{key}: unknown keys {sorted(set(options) - {'poll_interval'})}; "
                             "CanonicalReplayBuffer takes only poll_interval (seconds, > 0)")
        self.poll_interval = float(options.get("poll_interval", self.poll_interval))
        if not self.poll_interval > 0:
            raise ValueError(f"{key}.poll_interval must be > 0 seconds, got {self.poll_interval}")

    def _materialize_batch(self, partition_id, selected_prompt_uids, partition_snapshot) -> KVBatchMeta:
        batch = super()._materialize_batch(partition_id, selected_prompt_uids, partition_snapshot)
        if len(batch) < 2:
            return batch
        data = tq.kv_batch_get(keys=batch.keys, partition_id=partition_id, select_fields=["prompts", "responses"])
        uids = [key.rsplit("_", 2)[0] for key in batch.keys]  # keys are {uid}_{session}_{turn}
        batch.reorder(canonical_order(uids, _rows(data["prompts"]), _rows(data["responses"])))
        return batch
