"""What the HA-DW anchor's Ray actor costs one estimator call, side by side in one run.

Three timings at one batch size (N rows, L tokens, G responses per uid, uids shuffled round-robin, binary
rewards), interleaved in a fresh random order each round so machine noise hits all alike:

  (a) rtt    ``AnchorClient.observe`` with the anchor in its named Ray actor: the synchronous round trip
             one estimator call pays (one remote call of scalars; the reply carries the view and the state
             the driver keeps as its mirror);
  (b) ray    the full ``compute_hadw_outcome_advantage`` call with its anchor in the Ray actor;
  (c) local  the same call with the anchor in this process (a client created before ``ray.init``, so it
             keeps the in-process backend): the estimator's own compute.

Prints p50/p99 of each, the ratio rtt / local (round trip over the estimator's compute) and (ray - local)
as a cross-check of what the actor adds to a call. Target: rtt p50 <= 2 ms.
Run: ``python benchmarks/bench_anchor.py [--quick]`` (~1-2 min at the defaults on 2 cores, ~3 under heavy load).
"""

from __future__ import annotations

import argparse
import random
import time

import torch
from bench_estimators import make_batch  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

TARGET_P50_MS = 2.0


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def timed_rounds(runs: dict, repeats: dict[str, int], rounds: int) -> dict[str, list[float]]:
    """Seconds per call: ``rounds`` rounds, each calling fn ``repeats[name]`` times, names in a fresh order."""
    times = {name: [] for name in runs}
    order = list(runs)
    rng = random.Random(0)
    for _ in range(rounds):
        rng.shuffle(order)
        for name in order:
            fn = runs[name]
            for _ in range(repeats[name]):
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=8192)
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=60, help="rounds of (rtt x --rtt-per-round, ray, local)")
    parser.add_argument("--rtt-per-round", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.length, args.rounds = 256, 256, 10

    import ray
    import verl  # noqa: F401  (entry point registers hadw)

    from verl_hadw.verl.anchor_store import client as anchor_client
    from verl_hadw.verl.anchor_store.stores import LocalStore, RayStore
    from verl_hadw.verl.config.run_options import parse_run
    from verl_hadw.verl.estimators import compute_hadw_outcome_advantage

    def algorithm(key: str) -> dict:
        return {"adv_estimator": "hadw", "norm_adv_by_std_in_grpo": True, "hadw": {"state_key": key}, "dgpo": {}}

    local_cfg, ray_cfg, rtt_cfg = algorithm("bench/local"), algorithm("bench/ray"), algorithm("bench/rtt")
    rewards, mask, index = make_batch(args.rows, args.group, args.length)
    correct, count = float(rewards.sum()), args.rows

    # The in-process client is created before Ray starts, so it keeps LocalStore with Ray up.
    local_client = anchor_client.get_client(parse_run(local_cfg).hadw)
    assert isinstance(local_client.store, LocalStore)
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        rtt_client = anchor_client.get_client(parse_run(rtt_cfg).hadw)
        ray_client = anchor_client.get_client(parse_run(ray_cfg).hadw)
        assert isinstance(rtt_client.store, RayStore) and isinstance(ray_client.store, RayStore)

        def estimator(cfg):
            return lambda: compute_hadw_outcome_advantage(rewards, mask, index=index, config=cfg)

        runs = {
            "rtt": lambda: rtt_client.observe(correct, count),
            "ray": estimator(ray_cfg),
            "local": estimator(local_cfg),
        }
        repeats = {"rtt": args.rtt_per_round, "ray": 1, "local": 1}
        timed_rounds(runs, repeats, rounds=2)  # warm-up: actor start, allocator, first-call imports
        start = time.perf_counter()
        times = timed_rounds(runs, repeats, args.rounds)
        wall = time.perf_counter() - start
    finally:
        ray.shutdown()

    ms = {name: (percentile(ts, 50) * 1e3, percentile(ts, 99) * 1e3) for name, ts in times.items()}
    print(
        f"torch threads={torch.get_num_threads()}, N={args.rows}, L={args.length}, G={args.group}, "
        f"{args.rounds} rounds in {wall:.0f} s"
    )
    print(f"{'timing':>8} {'calls':>6} {'p50 ms':>9} {'p99 ms':>9}")
    for name, (p50, p99) in ms.items():
        print(f"{name:>8} {len(times[name]):>6} {p50:>9.3f} {p99:>9.3f}")
    rtt50, local50, ray50 = ms["rtt"][0], ms["local"][0], ms["ray"][0]
    print(f"round trip / estimator compute (p50): {rtt50 / local50:.4f} ({rtt50:.3f} ms / {local50:.1f} ms)")
    print(f"round trip / estimator compute (p99): {ms['rtt'][1] / ms['local'][1]:.4f}")
    print(f"full call with actor - in-process (p50): {ray50 - local50:+.3f} ms (noise of the {local50:.0f} ms call)")
    verdict = "met" if rtt50 <= TARGET_P50_MS else "NOT met"
    print(f"target rtt p50 <= {TARGET_P50_MS} ms: {verdict} ({rtt50:.3f} ms)")


if __name__ == "__main__":
    main()
