"""``verl-hadw doctor``: is the plugin wired into verl (version, entry point, registration, Ray)?"""

from __future__ import annotations

import argparse
import subprocess
import sys

REGISTRATION_CHECK = (
    "import verl\n"
    "from verl.trainer.ppo.core_algos import get_adv_estimator_fn\n"
    "for name in ('hadw', 'dgpo'):\n"
    "    fn = get_adv_estimator_fn(name)\n"
    "    print(name, '->', fn.__module__ + '.' + fn.__qualname__)\n"
)


def doctor(_args: argparse.Namespace) -> int:
    """Report verl's version, registration in a fresh ``import verl`` process, and Ray; exit 1 on a problem."""
    from importlib.metadata import entry_points

    from verl_hadw import VERL_RANGE, VERL_VERSION

    try:  # the adapter's import checks the installed verl against the range, without importing verl
        from verl_hadw.verl.support import installed_verl, support_summary
    except ImportError as refused:  # no verl, or one outside the range: nothing to check against it
        print(f"[FAIL] verl version: {refused}")
        print("problems:\n  - " + f'install a supported verl: pip install "verl{VERL_RANGE}"')
        return 1
    problems = []
    verl_version = installed_verl()
    tested = "" if verl_version == VERL_VERSION else f"; the project tests {VERL_VERSION} most"
    print(f"[ok] verl version: {verl_version} (verl-hadw supports verl{VERL_RANGE}{tested})")
    print(f"       on this verl: {support_summary(verl_version)}")

    eps = [ep for ep in entry_points(group="verl.plugins") if ep.value.startswith("verl_hadw")]
    print(f"[{'ok' if eps else 'FAIL'}] verl.plugins entry point: {', '.join(ep.value for ep in eps) or 'missing'}")
    if not eps:
        problems.append("reinstall verl-hadw (pip install -e .) so its verl.plugins entry point exists")

    proc = subprocess.run([sys.executable, "-c", REGISTRATION_CHECK], capture_output=True, text=True)
    registered = proc.returncode == 0
    print(f"[{'ok' if registered else 'FAIL'}] registration after a plain 'import verl' in a fresh process:")
    for line in (proc.stdout if registered else proc.stderr).strip().splitlines()[-4:]:
        print(f"       {line}")
    if not registered:
        problems.append(
            "the plugin did not register (verl hides plugin import errors: "
            "try 'python -c \"import verl_hadw.verl.estimators\"')"
        )

    try:
        import ray

        print(f"[ok] ray {ray.__version__} importable (cluster initialised here: {ray.is_initialized()})")
    except ImportError as exc:
        print(f"[FAIL] ray: {exc}")
        problems.append("install ray")

    from verl_hadw.verl.support import verl_trl_clash

    clash = verl_trl_clash()  # a warning, not a failure: TRL users of the [trl] extra do not train with verl here
    fine = "no clash (TRL absent, or it has what verl imports)"
    print(f"[{'warn' if clash else 'ok'}] TRL beside verl: {clash or fine}")

    print("all good" if not problems else "problems:\n  - " + "\n  - ".join(problems))
    return 0 if not problems else 1


def add_subcommand(sub) -> None:
    sub.add_parser("doctor", help="check that verl sees the hadw/dgpo estimators").set_defaults(func=doctor)
