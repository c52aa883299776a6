"""The CPU demo's picture: reward, the HA-DW anchor C⁻ (prior) and the batch accuracy y_t per step, as a PNG."""

from __future__ import annotations

from pathlib import Path

from verl_hadw.toy.plotting import pyplot, save_figure

SERIES = [  # (verl metric, label, line style)
    ("critic/score/mean", "reward (mean over the step's responses)", dict(lw=5, alpha=0.35)),
    ("hadw/anchor_prior", "anchor C⁻ (prior, Eq. 8)", dict(ls="--", marker=".")),
    ("hadw/batch_acc", "batch accuracy y_t (Eq. 7; = the reward for a 0/1 reward)", dict(ls=":", marker="x", ms=4)),
]


def rise(steps: dict[int, dict[str, float]], k: int = 5) -> tuple[float, float]:
    """Mean reward of the first ``k`` and of the last ``k`` training steps."""
    rewards = [steps[s]["critic/score/mean"] for s in sorted(steps) if s > 0 and "critic/score/mean" in steps[s]]
    if len(rewards) < k:
        raise ValueError(f"need at least {k} training steps with critic/score/mean, got {len(rewards)}")
    return sum(rewards[:k]) / k, sum(rewards[-k:]) / k


def plot_run(steps: dict[int, dict[str, float]], path, title: str = "CPU demo") -> Path:
    """One line per ``SERIES`` metric the run logged (C⁻ and y_t only exist for hadw runs)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for metric, label, style in SERIES:
        xs = [s for s in sorted(steps) if s > 0 and metric in steps[s]]
        if xs:
            ax.plot(xs, [steps[s][metric] for s in xs], label=label, **style)
    ax.set_xlabel("training step")
    ax.set_ylim(0, 1)
    ax.set_title(title)
    ax.legend(fontsize=8)
    return save_figure(fig, path, dpi=110)
