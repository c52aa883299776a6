import pytest


@pytest.fixture(autouse=True)
def _fresh_process_state():
    """Each test starts as a fresh process: no anchors, no buffered metrics, verl's step unset."""
    from verl_hadw import process_state

    process_state.reset()
    yield
    process_state.reset()


# ------------------------------------------------------------------------- the session's main_ppo launches
E2E_TIMINGS = pytest.StashKey[str]()


def launches_of(items) -> list[str]:
    """The launches the tests name with ``@pytest.mark.e2e``, in order, each once."""
    from e2e_runs import LAUNCHES

    names = []
    for item in items:
        for marker in item.iter_markers("e2e"):
            unknown = [n for n in marker.args if n not in LAUNCHES]
            if unknown:
                raise pytest.UsageError(f"{item.nodeid}: unknown e2e launch {unknown}; see tests/e2e_runs.py")
            names += [n for n in marker.args if n not in names]
    return names


@pytest.hookimpl(trylast=True)  # after -m / -k have deselected what will not run
def pytest_collection_modifyitems(config, items):
    """The tests that read main_ppo launches (``@pytest.mark.e2e``) go last, so that the launches, started when the
    session's first test runs (``_e2e_pool``), overlap every other test."""
    launches_of(items)  # an unknown launch name fails the collection
    items.sort(key=lambda item: item.get_closest_marker("e2e") is not None)  # stable: the order within stays


@pytest.fixture(scope="session", autouse=True)
def _e2e_pool(request, tmp_path_factory):
    """Starts the selected tests' launches in the background at the session's first test (tests/e2e_pool.py)."""
    names = launches_of(request.session.items)  # the tests that will run, after -m / -k
    if not names:
        yield None
        return
    from e2e_pool import Pool, workers_from_env
    from e2e_runs import LAUNCHES

    from verl_hadw.toy.launch import ensure_assets

    assets = str(tmp_path_factory.mktemp("assets"))
    ensure_assets(assets)  # once, before launches share it
    pool = Pool(tmp_path_factory.mktemp("e2e"), assets, LAUNCHES, workers=workers_from_env())
    pool.start(names)
    yield pool
    pool.close()
    timings = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in sorted(pool.timings.items()))
    request.config.stash[E2E_TIMINGS] = f"main_ppo launches ({pool.workers} at a time): {timings}"


def pytest_terminal_summary(terminalreporter, config):
    """The launches' own wall times, beside pytest's --durations (where a test shows only its wait)."""
    if E2E_TIMINGS in config.stash:
        terminalreporter.write_line(config.stash[E2E_TIMINGS])


@pytest.fixture
def e2e(_e2e_pool, request):
    """The session's launch pool; ``e2e.result(name)`` waits for a launch named by the test's ``e2e`` marker."""
    marker = request.node.get_closest_marker("e2e")
    assert marker is not None, "a test that reads main_ppo launches names them: @pytest.mark.e2e('name', ...)"
    return _e2e_pool
