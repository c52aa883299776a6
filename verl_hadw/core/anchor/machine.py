"""The HA-DW difficulty anchor C_t (Eqs. 7-12) as a pure, serialisable state machine.

A step may reach the estimator in several calls: every call of the open step sees the same prior C_t⁻ and adds its
counts to y_t; the posterior C_t⁺ is committed when a later step's first call arrives."""

from __future__ import annotations

import copy
import math
from dataclasses import asdict, dataclass, field, replace

from verl_hadw.core.errors import AnchorStepError
from verl_hadw.core.options import AnchorConfig

SCHEMA_VERSION = 1  # the only one read: a file of another schema is refused, naming it
# Frozen: the anchor's last m values span < FREEZE_ANCHOR_MOVE while the mean of the last m y_t is more than
# FREEZE_ACCURACY_MOVE away from C_t⁺ (a y_t - y_{t-m} test would miss slow ramps).
FREEZE_ANCHOR_MOVE = 1e-3
FREEZE_ACCURACY_MOVE = 0.05


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def population_std(values: list[float]) -> float:
    """sqrt((1/m) Σ (v - v̄)²), the population std of Eq. 10."""
    mean = _mean(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


@dataclass(frozen=True)
class AnchorView:
    """What one estimator call needs and reports: the step's prior and the posterior so far."""

    step: int
    prior: float  # C_t⁻, used in Eq. 13 by every call of step t
    posterior: float  # C_t⁺ from the step's calls so far (final after its last call)
    batch_acc: float  # y_t over the step's calls so far (Eq. 7)
    eta_t: float
    sigma_t: float
    frozen: bool  # the anchor-freeze warning condition holds (see FREEZE_* above)
    warn: bool = False  # first time ``frozen`` held in this anchor's life: the caller should warn once


@dataclass
class AnchorState:
    """C_t and its history. ``observe`` is the only mutation; ``to_dict``/``from_dict`` round-trip exactly."""

    config: AnchorConfig = field(default_factory=AnchorConfig)
    open_step: int | None = None  # the step whose calls are being accumulated
    prior: float | None = None  # C⁻ of the open step
    correct: float = 0.0  # Σ accuracy over the open step's valid responses (K_t of Eq. 7)
    count: int = 0  # number of valid responses of the open step (B_t of Eq. 7)
    calls: list[int] = field(default_factory=list)  # call ids already counted in the open step
    posteriors: list[float] = field(default_factory=list)  # committed C⁺, newest last (m + 1 kept)
    accuracies: list[float] = field(default_factory=list)  # committed y_t, newest last (m + 1 kept)
    committed_steps: int = 0  # number of steps committed so far
    warned_frozen: bool = False

    def observe(self, step: int, call: int, correct: float, count: int) -> AnchorView:
        """Add one call's counts to ``step`` (a repeated ``(step, call)`` once; a later step first commits the open
        one) and return the step's prior and running posterior."""
        if count <= 0:
            raise ValueError(f"an anchor observation needs at least one valid response, got count={count}")
        if self.open_step is not None and step < self.open_step:
            raise AnchorStepError(
                f"anchor received step {step} after step {self.open_step}: a restarted run must resume from its "
                "checkpoint, which restores the anchor, instead of starting the anchor again")
        if self.open_step is not None and step > self.open_step:
            self._commit()
        if self.open_step is None or step != self.open_step:
            self.prior = self._next_prior(correct / count)
            self.open_step, self.correct, self.count, self.calls = step, 0.0, 0, []
        if call not in self.calls:
            self.calls.append(call)
            self.correct += float(correct)
            self.count += int(count)
        view = self.view()
        if view.frozen and not self.warned_frozen:
            self.warned_frozen = True
            view = replace(view, warn=True)
        return view

    def view(self) -> AnchorView:
        """The open step's prior, running y_t and the posterior it would commit now."""
        if self.open_step is None:
            raise RuntimeError("the anchor has not observed any step yet")
        y = self.correct / self.count
        posterior, eta_t, sigma_t = self._posterior(y)
        # the prior Eq. 13 compares p̂ with; ``include_current`` (the released code) folds y_t into it
        current = self.config.mode == "moving_average" and self.config.include_current
        return AnchorView(step=self.open_step, prior=_mean(self._recent(y)) if current else self.prior,
                          posterior=posterior, batch_acc=y, eta_t=eta_t, sigma_t=sigma_t,
                          frozen=self._frozen(posterior, y))

    def _next_prior(self, first_y: float) -> float:
        """C_t⁻ of a new step: the previous posterior, or the initial anchor on the first step."""
        cfg = self.config
        if cfg.mode == "fixed":
            return cfg.fixed_value
        if self.posteriors:
            return self.posteriors[-1]  # Eq. 12: C_{t-1}⁺ → C_t⁻
        # Paper silent on C_0: "first_batch" uses the first call's accuracy (= y_1 with one call per step).
        return first_y if cfg.init == "first_batch" else float(cfg.init)

    def _recent(self, y: float) -> list[float]:
        """The last h (or m) batch accuracies, y_t the newest."""
        return (self.accuracies + [y])[-self.config.window :]

    def _posterior(self, y: float) -> tuple[float, float, float]:
        """(C_t⁺, η_t, σ_t) for batch accuracy y_t."""
        cfg = self.config
        if cfg.mode == "fixed":
            return cfg.fixed_value, 0.0, 0.0
        if cfg.mode == "moving_average":  # App. F hard update: C_t⁺ = (1/h)(Σ_{j=1}^{h-1} y_{t-j} + y_t)
            window = self._recent(y)
            return _mean(window), 1.0 / len(window), population_std(window)
        # Eq. 9-10 over the last m beliefs C_{t-1..t-m} (or the last m batch accuracies, sigma_source=accuracy)
        past = (self.posteriors if cfg.sigma_source == "anchor" else self.accuracies)[-cfg.window :]
        sigma_t = population_std(past) if len(past) >= 2 else cfg.sigma_warmup
        eta_t = min(max(cfg.eta * sigma_t, cfg.eta_min), 1.0)  # Eq. 11, bounded to [eta_min, 1]
        posterior = (1.0 - eta_t) * self.prior + eta_t * y  # Eq. 8
        return posterior, eta_t, sigma_t

    def _frozen(self, posterior: float, y: float) -> bool:
        m = self.config.window
        if self.config.mode != "kalman" or len(self.posteriors) < m:
            return False
        values = self.posteriors[-m:] + [posterior]
        accuracy_gap = abs(_mean(self._recent(y)) - posterior)
        return max(values) - min(values) < FREEZE_ANCHOR_MOVE and accuracy_gap > FREEZE_ACCURACY_MOVE

    def _commit(self) -> None:
        y = self.correct / self.count
        posterior = self._posterior(y)[0]
        keep = self.config.window + 1  # m for σ_t, one more for the freeze check
        self.posteriors = (self.posteriors + [posterior])[-keep:]
        self.accuracies = (self.accuracies + [y])[-keep:]
        self.committed_steps += 1

    def to_dict(self) -> dict:
        return {**asdict(self), "schema_version": SCHEMA_VERSION}

    @classmethod
    def from_dict(cls, data: dict, config: AnchorConfig | None = None) -> "AnchorState":
        """Rebuild a state; ``config`` (the run's current anchor config) overrides the saved one."""
        data = copy.deepcopy(data)  # the state owns its lists: observing it never changes ``data`` (a store's mirror)
        version = data.pop("schema_version", None)
        if version != SCHEMA_VERSION:
            raise ValueError(f"unsupported anchor state schema_version {version!r} (readable: {SCHEMA_VERSION})")
        saved = data.pop("config")
        return cls(config=config or AnchorConfig(**saved), **data)
