"""``hfcpu``: a CPU rollout for verl's server-based rollout path, generating with ``transformers`` (docs/cpu.md).

verl 0.9.1 registers only vLLM, SGLang and TRT-LLM servers; this plugs in behind the same interfaces: ``HFCPUServer``
(a Ray actor holding the policy; ``generate`` returns verl's ``TokenOutput``), ``HFCPUServerAdapter`` (the
``BaseRollout`` that verl's ``naive`` checkpoint engine updates) and ``HFCPUReplica`` (the ``RolloutReplica``).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections import Counter
from typing import Any

import ray
import torch
from verl.workers.rollout.base import _ROLLOUT_REGISTRY, BaseRollout
from verl.workers.rollout.replica import RolloutReplica, RolloutReplicaRegistry, TokenOutput
from verl.workers.rollout.utils import ensure_async_iterator

logger = logging.getLogger(__name__)

__all__ = [
    "HFCPUServer", "HFCPUServerAdapter", "HFCPUReplica", "SampleSeeds", "decode", "reference_generate", "server_name",
]

NAME = "hfcpu"
DETERMINISTIC_ID = re.compile(r"^det-\d+$")  # verl's request id under rollout.full_determinism: det-<batch row>


def server_name(replica_rank: int) -> str:
    return f"hfcpu_server_{replica_rank}"


class SampleSeeds:
    """The sampling seed of each request, so that what a step samples does not depend on the order requests arrive.

    A request for prompt p at weight version t is the k-th for (p, slot) since the last weight update; slot is verl's
    request id ``det-<batch row>`` when it sends one (``rollout.full_determinism=true``, legacy trainer), else empty.
    Seeding by (p, slot, k, t) leaves arrival order to decide only which of a prompt's ``rollout.n`` copies gets which
    draw; the v1 trainer's rows are then put in order by ``sampler.CanonicalReplayBuffer``, so a resumed run
    generates what an uninterrupted one does at the same step (docs/cpu.md, "Deterministic runs").
    """

    def __init__(self):
        self.seen: Counter = Counter()  # requests per (prompt, slot) since the last weight update

    def __call__(self, request_id: str, prompt_ids: list[int], global_steps: int) -> int:
        key = hashlib.sha256(repr(list(prompt_ids)).encode()).hexdigest()[:16]
        slot = request_id if DETERMINISTIC_ID.match(str(request_id)) else ""
        occurrence = self.seen[key, slot]
        self.seen[key, slot] += 1
        return int(hashlib.sha256(f"{key}:{slot}:{occurrence}:{global_steps}".encode()).hexdigest()[:15], 16)

    def reset(self) -> None:
        self.seen.clear()


def decode(model, prompt_ids: list[int], max_new_tokens: int, temperature: float = 1.0, top_p: float = 1.0,
           top_k: int = -1, logprobs: bool = False) -> tuple[list[int], list[float] | None]:
    """Sample one response token by token with a KV cache; returns (token ids, their log-probs or None).

    Draws what ``model.generate(do_sample=temperature > 0, ...)`` draws from the same global RNG state, with the
    same log-probs bit for bit (``tests/e2e/test_cpu_rollout.py``), in 0.76 of its time on the demo's model
    (``benchmarks/bench_hfcpu_decode.py``: generate's per-call set-up costs more than a tiny model's forward).
    Log-probs are of the temperature-scaled logits, before top-k / top-p. ``top_k <= 0`` and ``top_p = 1`` switch
    those filters off, as in the vLLM-style sampling parameters verl sends; ``generate`` read ``top_k=None`` as its
    own default of 50.
    """
    from transformers import (
        DynamicCache,
        LogitsProcessorList,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    sample = temperature > 0
    warpers = LogitsProcessorList()
    if sample and temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(temperature))
    if sample and top_k > 0:
        warpers.append(TopKLogitsWarper(top_k))
    if sample and top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p))
    eos = model.generation_config.eos_token_id
    eos = set() if eos is None else {eos} if isinstance(eos, int) else set(eos)
    ids = torch.tensor([prompt_ids], dtype=torch.long)
    mask = torch.ones_like(ids)
    cache = DynamicCache(config=model.config)
    tokens, log_probs = [], []
    with torch.no_grad():
        step_input = ids
        for _ in range(max_new_tokens):
            # logits_to_keep=1: the last position only, as generate asks; the full-prompt lm_head rounds differently
            out = model(input_ids=step_input, attention_mask=mask, past_key_values=cache, use_cache=True,
                        logits_to_keep=1)
            logits = out.logits[:, -1, :].float()
            if sample:
                probs = torch.softmax(warpers(ids, logits), dim=-1)
                token = torch.multinomial(probs, num_samples=1)
            else:
                token = logits.argmax(dim=-1, keepdim=True)
            if logprobs:
                scaled = logits / temperature if sample else logits
                log_probs.append(torch.log_softmax(scaled, dim=-1)[0, token[0, 0]].item())
            tokens.append(int(token))
            if tokens[-1] in eos:
                break
            ids = torch.cat([ids, token], dim=1)
            mask = torch.cat([mask, mask.new_ones(1, 1)], dim=1)
            step_input = token
    return tokens, (log_probs if logprobs else None)


def reference_generate(model, prompt_ids: list[int], max_new_tokens: int, temperature: float = 1.0,
                       top_p: float = 1.0, top_k: int = -1) -> tuple[list[int], list[float]]:
    """What the server ran before :func:`decode`, kept as its reference: ``transformers``' ``generate`` with the same
    sampling parameters (``top_k <= 0``: no top-k, passed on as ``generate``'s 0), returning (token ids, log-probs
    of the temperature-scaled raw logits). ``tests/e2e/test_cpu_rollout.py`` and ``benchmarks/bench_hfcpu_decode.py``
    compare the two draw by draw."""
    ids = torch.tensor([prompt_ids])
    sample = temperature > 0
    with torch.no_grad():
        out = model.generate(
            ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens, do_sample=sample,
            temperature=temperature if sample else None, top_p=top_p if sample else None,
            top_k=max(top_k, 0) if sample else None, return_dict_in_generate=True, output_logits=True,
            pad_token_id=model.generation_config.pad_token_id,
        )
    tokens = out.sequences[0, ids.shape[1]:].tolist()
    logits = torch.stack(out.logits, dim=1)[0].float() / (temperature if sample else 1.0)
    log_probs = torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(tokens)[:, None]).squeeze(-1).tolist()
    return tokens, log_probs


def _get(config: Any, key: str, default=None):
    if hasattr(config, "get"):
        return config.get(key, default)
    return getattr(config, key, default)


class HFCPUServer:
    """One rollout replica: a ``transformers`` causal LM on CPU behind verl's server-actor methods."""

    def __init__(self, config, model_config, replica_rank: int = 0):
        from transformers import AutoModelForCausalLM

        self.config = config
        path = _get(model_config, "local_path") or _get(model_config, "path")
        self.model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager", torch_dtype=torch.float32)
        self.model.eval()
        self.replica_rank = replica_rank
        self.global_steps = 0
        self.seeds = SampleSeeds()
        from verl_hadw.cpu.platform import pin_threads

        pin_threads()

    async def generate(
        self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs
    ) -> TokenOutput:
        params = dict(sampling_params)
        response_length = int(_get(self.config, "response_length"))
        max_tokens = params.pop("max_tokens", None) or params.pop("max_new_tokens", None) or response_length
        torch.manual_seed(self.seeds(request_id, prompt_ids, self.global_steps))
        tokens, log_probs = decode(
            self.model,
            list(prompt_ids),
            max_new_tokens=int(min(max_tokens, response_length)),
            temperature=float(params.get("temperature", 1.0)),
            top_p=float(params.get("top_p", 1.0)),
            top_k=int(params.get("top_k", -1)),
            logprobs=bool(params.get("logprobs")),
        )
        return TokenOutput(
            token_ids=tokens,
            log_probs=log_probs,
            stop_reason="completed",
            extra_fields={"global_steps": self.global_steps},
        )

    def load_weights(self, state_dict: dict[str, torch.Tensor], global_steps: int | None = None) -> None:
        missing, unexpected = self.model.load_state_dict(state_dict, strict=False)
        unexpected = [k for k in unexpected if not k.endswith("rotary_emb.inv_freq")]
        if unexpected or [k for k in missing if k != "lm_head.weight"]:
            raise RuntimeError(f"hfcpu weight sync mismatch: missing={missing} unexpected={unexpected}")
        if global_steps is not None:
            self.global_steps = int(global_steps)
        self.seeds.reset()

    # verl's replica / checkpoint-engine control surface: nothing to manage on CPU.
    async def wake_up(self):
        return None

    async def sleep(self):
        return None

    async def clear_kv_cache(self):
        return None

    async def release_kv_cache(self):
        return None

    async def resume_kv_cache(self):
        return None

    async def abort_all_requests(self, reject_request: bool = False):
        return {"aborted_count": 0, "request_ids": []}

    async def resume_generation(self):
        return None

    async def start_profile(self, **kwargs):
        return None

    async def stop_profile(self):
        return None


class HFCPUServerAdapter(BaseRollout):
    """The rollout object inside verl's hybrid actor worker: forwards weight updates to its server."""

    def __init__(self, config, model_config, device_mesh, *args, **kwargs):
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", 0))
        world = self.config.tensor_model_parallel_size * self.config.data_parallel_size
        self.replica_rank, self.rollout_rank = rank // world, rank % world
        if kwargs.get("replica_rank") is not None:  # a standalone replica's worker (separate_async) names its own
            self.replica_rank = int(kwargs["replica_rank"])
        self.sleep_level = 2

    async def resume(self, tags: list[str]):
        return None

    async def release(self):
        return None

    async def update_weights(self, weights, wire_format: str = "named_tensors", **kwargs):
        if wire_format != "named_tensors":
            raise ValueError(f"hfcpu supports wire_format='named_tensors' only, got {wire_format!r}")
        state = {}
        # every rank must drain the weights (they may hold collectives); the hfcpu_ray engine's are async
        async for name, tensor in ensure_async_iterator(weights):
            if hasattr(tensor, "full_tensor"):
                tensor = tensor.full_tensor()
            state[name] = tensor.detach().to("cpu", copy=True)
        if self.rollout_rank == 0:
            server = ray.get_actor(server_name(self.replica_rank))
            await server.load_weights.remote(state, kwargs.get("global_steps"))


class HFCPUReplica(RolloutReplica):
    """A replica made of one ``HFCPUServer`` actor."""

    async def launch_servers(self):
        server = (
            ray.remote(HFCPUServer)
            .options(name=server_name(self.replica_rank), num_cpus=0, max_concurrency=self.max_concurrency)
            .remote(self.config, self.model_config, self.replica_rank)
        )
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"{NAME}-{self.replica_rank}"


_ROLLOUT_REGISTRY[(NAME, "async")] = f"{__name__}.HFCPUServerAdapter"
RolloutReplicaRegistry.register(NAME, lambda: HFCPUReplica)
