"""verl_hadw.toy.console_log: the one reader of verl's console step lines."""

from verl_hadw.toy.console_log import iter_console, parse_steps


def test_parse_steps_reads_ray_prefixed_coloured_lines_and_scalar_reprs():
    log = "\n".join([
        "Training Progress: 10%",
        "(TaskRunner pid=123) step:1 - hadw/anchor_prior:0.25 - critic/score/mean:np.float64(0.5) - note:abc",
        "\x1b[36m(TaskRunner pid=123)\x1b[0m step:2 - hadw/anchor_prior:tensor(0.3) - val-core/math500/acc/mean@4:nan",
        "step:2 - hadw/anchor_prior:0.35",
    ])
    steps = parse_steps(log)
    assert sorted(steps) == [1, 2]
    assert steps[1] == {"hadw/anchor_prior": 0.25, "critic/score/mean": 0.5}  # "abc" is not a number: skipped
    assert steps[2]["hadw/anchor_prior"] == 0.35  # later lines win
    assert steps[2]["val-core/math500/acc/mean@4"] != steps[2]["val-core/math500/acc/mean@4"]  # nan
    assert [row[:2] for row in iter_console(log.splitlines())][:2] == [(1, 1), (1, 1)]


def test_lines_without_a_step_are_ignored():
    assert parse_steps("step 1 - a:1\nstep:x - a:1\n") == {}


def test_a_step_line_ray_cut_in_pieces_is_joined_back():
    """From a study run's log: Ray forwarded verl's step-10 line in two pieces, another actor's line between them.
    The second piece holds most metrics (validation included) and ``training/global_step:10`` inside it, which is
    not a step line of its own."""
    log = "\n".join([
        "\x1b[36m(TaskRunnerV1 pid=7)\x1b[0m step:9 - critic/score/mean:0.25",
        "\x1b[36m(TaskRunnerV1 pid=7)\x1b[0m step:10 - global_seqlen/min:2784.0 - globa",
        "\x1b[36m(SimpleStorageUnit pid=8)\x1b[0m 2026-11-23 21:56:03,607 - WARNING - target_num_threads 8",
        "\x1b[36m(TaskRunnerV1 pid=7)\x1b[0m l_seqlen/mean:2784.0 - val-core/toy_easy/acc/mean@4:np.float64(0.53)"
        " - training/global_step:10 - critic/score/mean:0.2",
        "\x1b[36m(TaskRunnerV1 pid=7)\x1b[0m ",
        "\x1b[36m(TaskRunnerV1 pid=7)\x1b[0m  - hadw/phi_mean:1.25",  # cut before a separator
        "\x1b[36m(TaskRunnerV1 pid=7)\x1b[0m WARNING:2026-11-23 21:56:04,549:target_num_threads 8 should not exceed",
        "\x1b[36m(TaskRunnerV1 pid=7)\x1b[0m stray:1",  # the step line ended with the warning: not a piece of it
    ])
    steps = parse_steps(log)
    assert sorted(steps) == [9, 10]
    assert steps[10] == {
        "global_seqlen/min": 2784.0, "global_seqlen/mean": 2784.0, "val-core/toy_easy/acc/mean@4": 0.53,
        "training/global_step": 10.0, "critic/score/mean": 0.2, "hadw/phi_mean": 1.25,
    }
    assert steps[9] == {"critic/score/mean": 0.25}
