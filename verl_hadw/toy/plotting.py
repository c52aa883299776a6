"""Matplotlib on a headless machine: the Agg backend, and one way to write a figure as a PNG."""

from __future__ import annotations

from pathlib import Path


def pyplot():
    """``matplotlib.pyplot`` with the Agg backend (imported lazily: plotting is optional work)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path, dpi: int, rect=None) -> Path:
    """Lay out (within ``rect``, if given), write ``fig`` as a PNG at ``path`` (creating its folder), free it."""
    fig.tight_layout(rect=rect)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)
    return path
