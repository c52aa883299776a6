"""An adapter's first line: its framework must be installed, else one error naming the install command."""

from __future__ import annotations

import importlib.util


def install_command(extra: str) -> str:
    """The install line of an extra: from the registry once published, from a clone until then."""
    return f'pip install "verl-hadw[{extra}]" (from a clone: pip install -e ".[{extra}]")'


def require(module: str, adapter: str, extra: str) -> None:
    """Raise ``ModuleNotFoundError`` naming the install command unless ``module`` is installed (not imported). A folder
    of that name on ``sys.path`` (a namespace package: no origin) is not the framework."""
    try:
        spec = importlib.util.find_spec(module)
        found = spec is not None and spec.origin is not None
    except (ImportError, ValueError):  # a finder refused it, or a broken half-installed module
        found = False
    if not found:
        raise ModuleNotFoundError(f"{adapter} needs {module}, which is not installed: {install_command(extra)}",
                                  name=module)
