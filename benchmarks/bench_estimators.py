"""Estimator cost side by side, in one process and one run: hadw, dgpo, verl's grpo and grpo_vectorized,
and the floor every outcome estimator pays (``token_level_rewards.sum(-1)`` + ``scalar[:, None] * mask``).

Prints the median time of each and its ratio to the floor (the median over rounds of the ratio within a
round). Targets at N = 8192, L = 4096: hadw <= 1.05x the floor (its fixed costs, mainly factorising the string
uids, stay under 5%) and dgpo <= 1.4x (one more pass over the mask for its valid-token counts). Run:
``python benchmarks/bench_estimators.py [--quick] [--threads T] [--clock cpu] [--device cuda] [--uids tensor]``.

``--clock cpu`` times this process's CPU seconds instead of wall seconds: on a machine shared with other jobs
a descheduled process inflates wall times at random; with ``--threads 1`` CPU time is the wall time an idle
machine would show.

``--device cuda`` puts the batch on the GPU and times each call between two CUDA events, after the queue has
emptied (wall time of the GPU work and of every host read the call waits on); it then also counts, for one call
of each, the host syncs (``torch.cuda.set_sync_debug_mode``) and the CUDA kernels (``torch.profiler``).
``--uids tensor`` gives the group of each row as an int64 tensor on the batch's device (TRL's form) instead of
verl's uuid strings; verl's dict-based ``grpo`` is then left out (it would key its dict by tensor identity).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import uuid
import warnings

import numpy as np
import torch


def make_batch(n: int, group: int, length: int, seed: int = 0, uids: str = "str"):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(length // 8, length + 1, (n,), generator=g)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).float()
    rewards = torch.zeros(n, length)
    rewards[torch.arange(n), lengths - 1] = (torch.rand(n, generator=g) < 0.4).float()
    if uids == "tensor":  # TRL's form: consecutive runs of ``group`` rows, numbered
        return rewards, mask, torch.arange(n) // group
    rng = random.Random(seed)  # verl's uids: str(uuid4()) per prompt, repeated over its responses
    prompts = [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(-(-n // group))]
    index = np.array([prompts[i // group] for i in range(n)], dtype=object)
    return rewards, mask, index


TARGETS = {"hadw": 1.05, "dgpo": 1.4}  # x floor, at N, L = TARGET_SIZE
TARGET_SIZE = (8192, 4096)


class CudaClock:
    """Seconds of one call on the GPU: the queue emptied first, then the time between two events around it."""

    def __call__(self, fn) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3


def host_clock(clock):
    def timed(fn) -> float:
        start = clock()
        fn()
        return clock() - start
    return timed


def timed_round_robin(runs: dict, repeats: int, clock=time.perf_counter, timer=None) -> dict[str, list[float]]:
    """Seconds per call of each function, one per round; each round calls every function once, in a fresh
    random order, so that machine noise and allocator state hit all alike. ``timer(fn)``: seconds of one call
    (default: ``clock`` around it)."""
    timer = timer or host_clock(clock)
    times = {name: [] for name in runs}
    for name, fn in runs.items():
        fn()  # warm-up
    order = list(runs)
    rng = random.Random(0)
    for _ in range(repeats):
        rng.shuffle(order)
        for name in order:
            times[name].append(timer(runs[name]))
    return times


def cuda_counts(fn) -> tuple[int, int]:
    """(host syncs, CUDA kernels) of one call of ``fn``."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    syncs = sum("synchroniz" in str(w.message) for w in caught)
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    kernels = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                  and not e.name.startswith(("Memcpy", "Memset")))
    return syncs, kernels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2048, 8192])
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="wall or process CPU time")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke run")
    parser.add_argument("--mask", choices=("float", "int64"), default="float",
                        help="response_mask dtype: int64 is what verl's trainers pass (a float mask is scanned once)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the batch lives; cuda: CUDA-event timing, host syncs and kernels per call")
    parser.add_argument("--uids", choices=("str", "tensor"), default="str",
                        help="str: verl's uuid strings (factorised on the host); tensor: int64 on the device (TRL)")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.length, args.repeats = [256], 256, 2
    if args.threads:
        torch.set_num_threads(args.threads)
    cuda = args.device == "cuda"
    if cuda and args.clock == "cpu":
        parser.error("--clock cpu times the host process: with --device cuda the time is the GPU's (CUDA events)")
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    timer = CudaClock() if cuda else host_clock(clock)

    import verl  # noqa: F401  (entry point registers hadw/dgpo)
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    config = {"norm_adv_by_std_in_grpo": True, "hadw": {"state_key": "bench"}, "dgpo": {}}
    device = torch.cuda.get_device_name() if cuda else f"cpu, torch threads={torch.get_num_threads()}"
    print(f"{device}, G={args.group}, L={args.length}, median of {args.repeats}, "
          f"{'CUDA-event' if cuda else args.clock} clock, {args.mask} mask, {args.uids} uids")
    print(f"{'N':>6} {'estimator':>16} {'ms':>9} {'x floor':>8} {'target':>8}" + (f" {'syncs':>6} {'kernels':>8}"
                                                                                   if cuda else ""))
    names = ["hadw", "dgpo", "grpo_vectorized"] + ([] if cuda or args.uids == "tensor" else ["grpo"])
    for n in args.sizes:
        rewards, mask, index = make_batch(n, args.group, args.length, uids=args.uids)
        mask = mask.long() if args.mask == "int64" else mask
        rewards, mask = rewards.to(args.device), mask.to(args.device)
        index = index.to(args.device) if isinstance(index, torch.Tensor) else index

        def floor():
            scalar = rewards.sum(-1)
            return scalar[:, None] * mask

        runs = {"floor": floor}
        for name in names:
            fn = get_adv_estimator_fn(name)
            kwargs = dict(token_level_rewards=rewards, response_mask=mask, index=index)
            if name in ("hadw", "dgpo"):
                kwargs["config"] = config
            runs[name] = lambda fn=fn, kwargs=kwargs: fn(**kwargs)
        times = timed_round_robin(runs, args.repeats, timer=timer)
        for name, ts in times.items():
            # ratio: median over rounds of (this call / the floor call of the same round), so that load on a
            # shared machine, which comes and goes between rounds, cancels out
            seconds = statistics.median(ts)
            ratio = statistics.median(t / f for t, f in zip(ts, times["floor"]))
            target = TARGETS.get(name) if (n, args.length) == TARGET_SIZE else None
            verdict = "" if target is None else f"{'<=' if ratio <= target else 'MISS >'}{target}"
            extra = "{:>7} {:>8}".format(*cuda_counts(runs[name])) if cuda else ""
            print(f"{n:>6} {name:>16} {seconds * 1e3:>9.2f} {ratio:>8.3f} {verdict:>8}{extra}")


if __name__ == "__main__":
    main()
