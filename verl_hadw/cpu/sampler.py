"""A replay buffer for verl's v1 sync trainer that hands it each batch in a canonical row order (docs/cpu.md).

verl 0.9.1 builds a step's batch in the order the rollouts *finished*, which changes from run to run and, through
float sums over rows, makes two runs with the same seed drift apart. Plug it in through verl's custom sampler
(``trainer.v1.sampler.custom_sampler.path=pkg://verl_hadw.cpu.sampler``, ``name=CanonicalReplayBuffer``).
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
    """verl's sync ``ReplayBuffer``, returning each batch sorted by content (:func:`canonical_order`).

    Sync trainer only (``trainer.v1.trainer_mode=sync``). verl passes a custom sampler only its base arguments, so
    DAPO's group filtering (``algorithm.filter_groups``) and ``sync_refill_failed_groups`` are not available with it.
    """

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
        # verl's buffer polls TransferQueue every 2 s, a wait sized for GPU batches (the CPU demo's rollouts finish in
        # about 1.4 s; docs/demo.md), and exposes no config key for it. The batch does not depend on it: the sync
        # trainer requests one batch of prompts and samples once all of them have finished.
        self.poll_interval = float(options.get("poll_interval", self.poll_interval))
        if not self.poll_interval > 0:
            raise ValueError(f"{key}.poll_interval must be > 0 seconds, got {self.poll_interval}")

    # verl 0.9.1's ``_materialize_batch`` lists the trajectories in the order they finished; ``verl_hadw.cpu``
    # refuses other verl versions. Rows that tie in the sort are identical in every field the update reads.
    def _materialize_batch(self, partition_id, selected_prompt_uids, partition_snapshot) -> KVBatchMeta:
        batch = super()._materialize_batch(partition_id, selected_prompt_uids, partition_snapshot)
        if len(batch) < 2:
            return batch
        data = tq.kv_batch_get(keys=batch.keys, partition_id=partition_id, select_fields=["prompts", "responses"])
        uids = [key.rsplit("_", 2)[0] for key in batch.keys]  # keys are {uid}_{session}_{turn}
        batch.reorder(canonical_order(uids, _rows(data["prompts"]), _rows(data["responses"])))
        return batch
