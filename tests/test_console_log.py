"""verl_hadw.console_log: the one reader of verl's console step lines."""

from verl_hadw.console_log import iter_console, parse_steps


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
