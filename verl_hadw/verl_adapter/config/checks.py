"""Config checks around ``algorithm.hadw`` / ``algorithm.dgpo`` that the option parser cannot see.

verl ignores keys it does not know, so a misspelt section (``+algorithm.hadww.lambda_scale=1.5``, ``algorithm.HADW``,
``algorithm.dpgo``), an option one level too high (``+algorithm.lambda_scale``) or a section at the config root
(``+hadw.lambda_scale``) would silently leave the run on the defaults: each is a ``ConfigError`` with "did you mean".
Options of an estimator that is not selected (``algorithm.hadw.*`` under ``adv_estimator=dgpo``) are legal but have
no effect: a warning names them. Run before training by the checkpoint callback, and by the estimators once per
configuration (``call_config.read_call``: the one read of a call, whose parse and checks are cached), never on every
step. Each check takes what was read: the plain ``algorithm`` section and verl's ``trainer`` node.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import logging
import re
import warnings
from typing import Any, Mapping

from verl_hadw.core.errors import ConfigError, UnusedOptionsWarning
from verl_hadw.core.options import SECTIONS, declarations
from verl_hadw.verl_adapter.process_state import PROCESS
from verl_hadw.verl_adapter.verl_terms import CALLBACK_CLASS, CALLBACK_OVERRIDE

__all__ = [
    "check_sections", "unused_options", "warn_unused_options", "check_algorithm", "UnusedOptionsWarning",
    "unsaved_anchor", "warn_unsaved_anchor", "ignored_callback", "warn_ignored_callback", "is_our_callback",
    "section_of", "set_keys",
]


@functools.lru_cache(maxsize=1)
def _option_names() -> dict[str, str]:
    """Each option's name -> its section (``"lambda_scale": "hadw"``), nested options under their top section."""
    return {path.rsplit(".", 1)[1]: path.split(".")[0] for path, f in declarations().items()
            if f.metadata["kind"] != "section"}


@functools.lru_cache(maxsize=1)
def _verl_algorithm_keys() -> frozenset[str]:
    """Keys verl's own ``algorithm`` node may hold (its ``AlgoConfig`` fields and Hydra's ``_target_``)."""
    from verl.trainer.config import AlgoConfig

    return frozenset({f.name for f in dataclasses.fields(AlgoConfig)} | {"_target_"})


def _squash(name: Any) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def _near_section(name: Any) -> str | None:
    """``hadw``/``dgpo`` when ``name`` is a near miss of it: case, separators, one or two letters off."""
    squashed = _squash(name)
    for section in SECTIONS:
        if squashed == section or squashed.startswith(section) or squashed.endswith(section):
            return section
    hit = difflib.get_close_matches(squashed, list(SECTIONS), n=1, cutoff=0.7)
    return hit[0] if hit else None


def _looks_like(node: Any) -> bool:
    """A near-miss name is only an error when its content looks like ours (or it differs by case/separators):
    ``algorithm.dapo.foo`` of someone's own estimator is left alone, ``algorithm.dapo.temperature`` is not."""
    if not isinstance(node, Mapping):
        return True  # +algorithm.hadww=1.3: a scalar where a section belongs
    return any(difflib.get_close_matches(str(k), list(_option_names()), n=1, cutoff=0.8) for k in node)


def section_of(algorithm: Mapping, name: str) -> Mapping:
    """``algorithm.<name>`` of verl's ``algorithm`` section (a plain dict or a node; {} when absent)."""
    node = algorithm.get(name) if hasattr(algorithm, "get") else None
    if node is None:
        return {}
    if isinstance(node, Mapping):
        return node
    raise ConfigError(f"algorithm.{name} must be a mapping, got {type(node).__name__}: {node!r}")


def check_sections(algorithm: Mapping, root: Mapping | None = None) -> None:
    """Raise ``ConfigError`` for a near-miss section name or a misplaced option (see the module docstring).

    ``algorithm``: verl's ``algorithm`` section (as read: a plain dict, or a node); ``root``: the full config, to look
    at its top-level keys too.
    """
    node = algorithm if algorithm is not None else {}
    verl_keys = _verl_algorithm_keys()
    options = _option_names()
    for key, value in node.items():
        if key in SECTIONS or key in verl_keys:
            continue
        section = _near_section(key)
        if section is not None and (_squash(key) == section or _looks_like(value)):
            raise ConfigError(
                f"Unknown section 'algorithm.{key}': did you mean 'algorithm.{section}'? verl ignores unknown "
                f"algorithm keys, so its options would have no effect. Valid sections: algorithm.hadw, algorithm.dgpo."
            )
        hit = difflib.get_close_matches(str(key), list(options), n=1, cutoff=0.85)
        if hit:
            raise ConfigError(
                f"Unknown key 'algorithm.{key}': did you mean 'algorithm.{options[hit[0]]}.{hit[0]}'? Options of "
                "the estimators live in their sections (+algorithm.hadw.<key>, +algorithm.dgpo.<key>)."
            )
    top = root if root is not None else {}
    for key in top:
        section = _near_section(key) if _squash(key) != "algorithm" else None
        if section is not None and (_squash(key) == section or _looks_like(top[key])):
            raise ConfigError(
                f"Unknown top-level section '{key}': did you mean 'algorithm.{section}'? The estimators read their "
                f"options from algorithm.{section} only."
            )


def set_keys(node: Mapping, prefix: str) -> list[str]:
    """Every dotted key set under ``node`` (a mapping), leaves only: ``prefix.key.sub``."""
    keys = []
    for key, value in node.items():
        if isinstance(value, Mapping) and value:
            keys += set_keys(value, f"{prefix}.{key}")
        else:
            keys.append(f"{prefix}.{key}")
    return keys


def unused_options(algorithm: Any) -> list[str]:
    """Dotted keys set under ``algorithm.hadw`` / ``algorithm.dgpo`` that the selected estimator never reads.

    ``hadw`` reads ``algorithm.dgpo`` only as its base (``algorithm.hadw.base=dgpo``); its own threshold is
    ``algorithm.hadw.success_threshold``.
    ``dgpo`` reads ``algorithm.hadw.log_metrics``: the one metrics switch of both estimators.
    ``algorithm.hadw.state_key`` names the experiment's anchor, not a setting: the shipped base configs give it to
    every run, baselines included, so it is never reported.
    """
    estimator = algorithm.get("adv_estimator", "gae") if hasattr(algorithm, "get") else None
    hadw, dgpo = section_of(algorithm, "hadw"), section_of(algorithm, "dgpo")
    unused = []
    if estimator != "hadw":
        shared = {"algorithm.hadw.state_key"}  # names the anchor: every shipped base config sets it
        if estimator == "dgpo":
            shared.add("algorithm.hadw.log_metrics")
        unused += [k for k in set_keys(hadw, "algorithm.hadw") if k not in shared]
    if estimator not in ("hadw", "dgpo"):
        unused += set_keys(dgpo, "algorithm.dgpo")
    elif estimator == "hadw" and hadw.get("base", "grpo") != "dgpo":
        unused += set_keys(dgpo, "algorithm.dgpo")
    return unused


def warn_unused_options(algorithm: Any) -> list[str]:
    """``unused_options``, with one ``UnusedOptionsWarning`` naming them (Python shows it once per process)."""
    unused = unused_options(algorithm)
    if unused:
        estimator = algorithm.get("adv_estimator", "gae")
        one = len(unused) == 1
        warnings.warn(
            f"{', '.join(unused)} {'is' if one else 'are'} set but algorithm.adv_estimator={estimator} does not read "
            f"{'it' if one else 'them'}: {'it has' if one else 'they have'} no effect on this run (algorithm.hadw is "
            "read by hadw; algorithm.dgpo by dgpo, and by hadw with algorithm.hadw.base=dgpo).",
            UnusedOptionsWarning,
            stacklevel=2,
        )
    return unused


def check_algorithm(algorithm: Any, root: Any = None) -> list[str]:
    """Both checks: near misses raise, unused options warn (returned). The callback runs it before training with
    the full config; each estimator call runs it on its ``algorithm`` node too, for runs without the callback."""
    check_sections(algorithm, root)
    return warn_unused_options(algorithm)


# ------------------------------------------------------------------------------- an anchor nobody saves
# the class's path users name, and where it is defined: a subclass of it names either in its MRO
_CALLBACKS = {CALLBACK_CLASS, "verl_hadw.verl_adapter.checkpoint_callback.HadwCheckpointCallback"}


def is_our_callback(name: Any) -> bool:
    """Whether ``name`` (``trainer.checkpoint_callback_class``) is the plugin's callback, or a subclass of it."""
    if name in _CALLBACKS:
        return True
    if not isinstance(name, str) or not name:
        return False
    try:  # a subclass of ours saves the anchor too
        from verl.utils.import_utils import load_class_from_fqn

        mro = load_class_from_fqn(name).__mro__
    except Exception:  # verl reports a class it cannot load itself
        return False
    return any(f"{c.__module__}.{c.__qualname__}" in _CALLBACKS for c in mro)


def ignored_callback(algorithm: Any, trainer: Any, at_start: bool = False) -> str | None:
    """The notice for a config naming ``trainer.checkpoint_callback_class`` (every shipped YAML does) on a verl
    without that hook (0.9.0), which ignores the key without a word. None when that is not so. ``trainer``: verl's
    ``trainer`` node (None: unknown); ``at_start``: said by the start-up check (``startup_check``), else at the first
    estimator call."""
    from verl_hadw import verl_support

    if trainer is None or not hasattr(trainer, "get") or verl_support.has_checkpoint_callback():
        return None
    name = trainer.get("checkpoint_callback_class", None)
    if not name:
        return None
    estimator = algorithm.get("adv_estimator", "gae") if hasattr(algorithm, "get") else None
    instead = (
        "the HA-DW anchor is saved instead as a snapshot after every step "
        "(<trainer.default_local_dir>/verl_hadw_anchor/step_N.json, kept for the checkpointed steps) and restored "
        "from the one of the checkpoint verl resumes from; "
        if estimator == "hadw" else ""
    )
    return (
        f"trainer.checkpoint_callback_class={name} is ignored: verl {verl_support.installed_verl()} has no "
        f"checkpoint callbacks (they came with verl {verl_support.CALLBACK_SINCE}), so that class is never loaded. "
        "verl-hadw does without it: "
        f"{instead}"
        + ("the config was checked at start-up by hydra.callbacks.verl_hadw (verl_hadw.verl_adapter.startup_check)"
           if at_start else "the config is checked before Ray starts by hydra.callbacks.verl_hadw where the config "
           "names it (the shipped YAMLs do), and in any case at this first estimator call")
        + ". Remove the key to silence this notice."
    )


def unsaved_anchor(algorithm: Any, trainer: Any) -> str | None:
    """The warning for an HA-DW run on verl's v1 trainer that saves checkpoints (``trainer.save_freq > 0``) without
    the checkpoint callback: its anchor is in no checkpoint, so a resume stops for it. None when that is not so
    (the legacy trainer, and the v1 trainer of a verl without the hook, 0.9.0, save per-step snapshots).
    ``trainer``: verl's ``trainer`` node (None: unknown)."""
    from verl_hadw import verl_support

    estimator = algorithm.get("adv_estimator", "gae") if hasattr(algorithm, "get") else None
    if estimator != "hadw" or trainer is None or not hasattr(trainer, "get"):
        return None
    save_freq = trainer.get("save_freq", -1)
    if trainer.get("use_v1", True) is False or not isinstance(save_freq, int) or save_freq <= 0:
        return None
    if not verl_support.has_checkpoint_callback():  # verl 0.9.0: the estimator's snapshots save it (legacy_snapshots)
        return None
    if is_our_callback(trainer.get("checkpoint_callback_class", None)):
        return None
    hadw = section_of(algorithm, "hadw")
    client = PROCESS.anchors.get(hadw.get("state_key", "default") if hasattr(hadw, "get") else "default")
    if client is not None and client.persistence.saves_into_checkpoints:
        return None  # a HadwCheckpointCallback built in code (not named by the key) keeps this anchor
    return (
        f"HA-DW runs on verl's v1 trainer with checkpoints every {save_freq} steps (trainer.save_freq) but without "
        f"the plugin's checkpoint callback: the anchor is saved in no checkpoint, so resuming from one stops for "
        f"the missing anchor (or starts a fresh one with allow_missing_state). Set {CALLBACK_OVERRIDE}."
    )


def _warn_once(message: str | None) -> str | None:
    if message is not None and message not in PROCESS.warned:
        PROCESS.warned.add(message)
        warnings.warn(message, UserWarning, stacklevel=3)
        logging.getLogger(__name__).warning(message)
    return message


def warn_unsaved_anchor(algorithm: Any, trainer: Any) -> str | None:
    """``unsaved_anchor``, as one ``UserWarning`` per process."""
    return _warn_once(unsaved_anchor(algorithm, trainer))


def warn_ignored_callback(algorithm: Any, trainer: Any, at_start: bool = False) -> str | None:
    """``ignored_callback``, as one ``UserWarning`` per process."""
    return _warn_once(ignored_callback(algorithm, trainer, at_start))
