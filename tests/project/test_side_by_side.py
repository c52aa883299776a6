"""benchmarks/side_by_side.py, the loop of the side-by-side CPU benchmarks, on fake main_ppo runs: the order of the
runs, what each is told, which steps count, the medians and ratios, and the metrics check."""

import importlib.util
import sys
from pathlib import Path

import pytest
from repo_paths import ROOT

BENCHMARKS = ROOT / "benchmarks"
_spec = importlib.util.spec_from_file_location("side_by_side", BENCHMARKS / "side_by_side.py")
side_by_side = sys.modules["side_by_side"] = importlib.util.module_from_spec(_spec)  # as the benchmarks import it
_spec.loader.exec_module(side_by_side)

STEP_TIMES = {"fast": [9.0, 1.0, 1.0, 2.0], "slow": [9.0, 4.0, 4.0, 3.0]}  # steps 1-4; step 1 is the warm-up


class FakeLaunch:
    """Stands in for ``verl_hadw.toy.launch.run``: records each call and prints verl's console step lines."""

    def __init__(self, score=None, fail=None):
        self.calls = []
        self.score = score or {}  # variant tag -> training reward it logs (default 0.5)
        self.fail = fail

    def __call__(self, assets, overrides, cwd=None):
        self.calls.append((assets, overrides, cwd))
        tag = Path(next(o for o in overrides if o.startswith("trainer.default_local_dir="))).name.split("_")[1]
        if tag == self.fail:
            return 1, "Traceback ...\nRuntimeError: the run broke\n"
        lines = [f"(TaskRunner pid=7) step:{step} - timing_s/step:{seconds} - timing_s/gen:{seconds / 2} - "
                 f"critic/score/mean:{self.score.get(tag, 0.5)} - perf/max_memory_allocated_gb:{step}"
                 for step, seconds in enumerate(STEP_TIMES[tag], start=1)]
        return 0, "\n".join(["ray started", *lines, "done"]) + "\n"


VARIANTS = {"fast one": ["x=1"], "slow": ["x=2"]}


def run(launch, **kwargs):
    options = dict(steps=4, warmup=1, rounds=2, name="bench_t", launch=launch) | kwargs
    return side_by_side.run_side_by_side(VARIANTS, ("timing_s/step", "timing_s/gen"), **options)


def test_runs_alternate_and_each_gets_its_own_experiment():
    launch = FakeLaunch()
    run(launch)
    experiments = [next(o for o in overrides if "experiment_name" in o) for _, overrides, _ in launch.calls]
    assert experiments == ["trainer.experiment_name=bench_t_fast_0", "trainer.experiment_name=bench_t_slow_0",
                           "trainer.experiment_name=bench_t_slow_1", "trainer.experiment_name=bench_t_fast_1"]
    assets, overrides, work = launch.calls[0]
    assert overrides == ["x=1", "trainer.total_training_steps=4", "trainer.experiment_name=bench_t_fast_0",
                         f"trainer.default_local_dir={work}/ckpt_fast_0"]
    assert Path(work).name.startswith("bench_t_") and assets == f"{work}/assets"
    assert {(a, w) for a, _, w in launch.calls} == {(assets, work)}  # one work dir and asset set for all runs
    launch = FakeLaunch()
    run(launch, assets="/shared/assets")  # the benchmark's --assets
    assert {a for a, _, _ in launch.calls} == {"/shared/assets"}


def test_medians_skip_the_warm_up_and_pool_the_rounds():
    runs = run(FakeLaunch())
    assert runs.timings["fast one"]["timing_s/step"] == [1.0, 1.0, 2.0, 1.0, 1.0, 2.0]  # steps 2-4, two rounds
    assert runs.median("fast one", "timing_s/step") == 1.0 and runs.median("slow", "timing_s/step") == 4.0
    assert runs.median("slow", "timing_s/gen") == 2.0
    assert runs.ratio("slow", "timing_s/step", "fast one") == 4.0
    assert runs.ratio("fast one", "timing_s/gen", "slow") == 0.25


def test_metrics_check_ignores_timings_and_memory_but_not_what_was_learned():
    same = run(FakeLaunch())
    assert same.same_metrics()  # the step times and memory differ, the rewards do not
    assert same.metrics["slow"][2] == {"critic/score/mean": 0.5}
    assert not run(FakeLaunch(score={"slow": 0.75})).same_metrics()


def test_a_failed_run_or_no_measured_step_stops_the_benchmark():
    launch = FakeLaunch(fail="slow")
    with pytest.raises(SystemExit, match="slow run failed:\nTraceback ...\nRuntimeError: the run broke"):
        run(launch)
    assert len(launch.calls) == 2  # nothing runs after the failure
    with pytest.raises(ValueError, match="warmup=4 must leave at least one of the 4 steps"):
        run(FakeLaunch(), warmup=4)
