"""Checks of verl's config that the option parser cannot see, run once per configuration before training:
misspelt or misplaced sections ("did you mean"), unread options, an unsaved anchor, refused combinations."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import logging
import re
import warnings
from typing import Any, Mapping

import verl_hadw.verl.support as support
from verl_hadw.core.errors import ConfigError, UnusedOptionsWarning
from verl_hadw.core.options import SECTIONS, declarations, plain_dict
from verl_hadw.verl.process_state import PROCESS
from verl_hadw.verl.verl_terms import CALLBACK_CLASS, CALLBACK_OVERRIDE


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


def section_of(algorithm: Mapping, name: str) -> dict:
    """``algorithm.<name>`` of verl's ``algorithm`` section (a plain dict or a node) as a dict ({} when absent)."""
    return plain_dict(algorithm.get(name) if hasattr(algorithm, "get") else None, f"algorithm.{name}")


def check_sections(algorithm: Mapping, root: Mapping | None = None) -> None:
    """Raise ``ConfigError`` for a near-miss section name in ``algorithm`` (``algorithm.hadww``, ``algorithm.HADW``),
    an option one level too high (``algorithm.lambda_scale``) or a section at the ``root`` config's top (``hadw``)."""
    verl_keys, options = _verl_algorithm_keys(), _option_names()
    for key, value in (algorithm if algorithm is not None else {}).items():
        if key in SECTIONS or key in verl_keys:
            continue
        section = _near_section(key)
        if section is not None and (_squash(key) == section or _looks_like(value)):
            raise ConfigError(f"Unknown section 'algorithm.{key}': did you mean 'algorithm.{section}'? verl ignores "
                              "unknown algorithm keys, so its options would have no effect.")
        if hit := difflib.get_close_matches(str(key), list(options), n=1, cutoff=0.85):
            raise ConfigError(f"Unknown key 'algorithm.{key}': did you mean 'algorithm.{options[hit[0]]}.{hit[0]}'? "
                              "The estimators' options live in algorithm.hadw and algorithm.dgpo.")
    for key, value in (root if root is not None else {}).items():
        section = _near_section(key) if _squash(key) != "algorithm" else None
        if section is not None and (_squash(key) == section or _looks_like(value)):
            raise ConfigError(f"Unknown top-level section '{key}': did you mean 'algorithm.{section}'? The "
                              f"estimators read their options from algorithm.{section} only.")


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
    """Dotted keys set under ``algorithm.hadw`` / ``algorithm.dgpo`` that the selected estimator never reads (hadw
    reads ``algorithm.dgpo`` only with ``base=dgpo``; dgpo reads ``algorithm.hadw.log_metrics``; ``state_key``, set by
    every shipped base config, is never reported)."""
    estimator = algorithm.get("adv_estimator", "gae") if hasattr(algorithm, "get") else None
    hadw, dgpo = section_of(algorithm, "hadw"), section_of(algorithm, "dgpo")
    unused = []
    if estimator != "hadw":
        shared = {"algorithm.hadw.state_key"}  # names the anchor: every shipped base config sets it
        if estimator == "dgpo":
            shared.add("algorithm.hadw.log_metrics")
        unused += [k for k in set_keys(hadw, "algorithm.hadw") if k not in shared]
    if estimator not in ("hadw", "dgpo") or (estimator == "hadw" and hadw.get("base", "grpo") != "dgpo"):
        unused += set_keys(dgpo, "algorithm.dgpo")
    return unused


def check_algorithm(algorithm: Any, root: Any = None) -> list[str]:
    """``check_sections``, then ``unused_options`` (returned), named in one ``UnusedOptionsWarning``."""
    check_sections(algorithm, root)
    if unused := unused_options(algorithm):
        estimator = algorithm.get("adv_estimator", "gae")
        it, is_ = ("it", "is") if len(unused) == 1 else ("them", "are")
        warnings.warn(f"{', '.join(unused)} {is_} set but algorithm.adv_estimator={estimator} does not read {it}: "
                      f"no effect. Remove {it}, or select the estimator that reads {it}.", UnusedOptionsWarning)
    return unused  # warned from this one line: shown once per process, whoever checks


# ------------------------------------------------------------------------------- an anchor nobody saves
def is_our_callback(name: Any) -> bool:
    """Whether ``name`` (``trainer.checkpoint_callback_class``) is the plugin's callback, or a subclass of it."""
    if name == CALLBACK_CLASS:
        return True
    if not isinstance(name, str) or not name:
        return False
    try:  # a subclass of ours saves the anchor too
        from verl.utils.import_utils import load_class_from_fqn  # verl internal (checked on verl 0.9.0, 0.9.1)
        mro = load_class_from_fqn(name).__mro__
    except Exception:  # verl reports a class it cannot load itself
        return False
    return any(f"{c.__module__}.{c.__qualname__}" == CALLBACK_CLASS for c in mro)


def ignored_callback(algorithm: Any, trainer: Any, at_start: bool = False) -> str | None:
    """The notice for ``trainer.checkpoint_callback_class`` on verl 0.9.0, which ignores the key (None: not so)."""
    name = trainer.get("checkpoint_callback_class", None) if hasattr(trainer, "get") else None
    if not name or support.has_checkpoint_callback():
        return None
    estimator = algorithm.get("adv_estimator", "gae") if hasattr(algorithm, "get") else None
    instead = ("the HA-DW anchor is saved in per-step snapshots (<trainer.default_local_dir>/verl_hadw_anchor/) "
               "instead" if estimator == "hadw" else "nothing is lost")
    return (f"trainer.checkpoint_callback_class={name} is ignored: verl {support.installed_verl()} has no "
            f"checkpoint callbacks (verl >= {support.CALLBACK_SINCE}), and {instead}. Remove the key to silence "
            f"this notice{' (checked at start-up)' if at_start else ''}.")


def unsaved_anchor(algorithm: Any, trainer: Any) -> str | None:
    """The warning for an HA-DW run on verl >= 0.9.1's v1 trainer that saves checkpoints without the checkpoint
    callback, so its anchor is in none (None: not so, or ``trainer`` unknown)."""
    estimator = algorithm.get("adv_estimator", "gae") if hasattr(algorithm, "get") else None
    if estimator != "hadw" or trainer is None or not hasattr(trainer, "get"):
        return None
    save_freq = trainer.get("save_freq", -1)
    if (trainer.get("use_v1", True) is False or not isinstance(save_freq, int) or save_freq <= 0
            or not support.has_checkpoint_callback()  # verl 0.9.0: the estimator's snapshots save it
            or is_our_callback(trainer.get("checkpoint_callback_class", None))):
        return None
    client = PROCESS.anchors.get(section_of(algorithm, "hadw").get("state_key", "default"))
    if client is not None and client.persistence.saves_into_checkpoints:
        return None  # a HadwCheckpointCallback built in code (not named by the key) keeps this anchor
    return (f"HA-DW saves checkpoints every {save_freq} steps without the plugin's checkpoint callback, so the "
            f"anchor is saved in no checkpoint and a resume stops for it. Set {CALLBACK_OVERRIDE}.")


def warn_once(message: str | None) -> str | None:
    """``message`` (None: nothing) as one ``UserWarning`` and log line per process."""
    if message is not None and message not in PROCESS.warned:
        PROCESS.warned.add(message)
        warnings.warn(message, UserWarning, stacklevel=2)
        logging.getLogger(__name__).warning(message)
    return message


# ------------------------------------------------------------------------------------- refused combinations
def drops_groups(config) -> bool:
    """Whether verl drops degenerate groups before the estimator: ``filter_groups`` on a v1 trainer."""
    node = config.algorithm.get("filter_groups", None)
    return bool(node is not None and node.get("enable", False)) and bool(config.trainer.get("use_v1", True))


def check_filter_groups(config, run: Any = None) -> None:
    """Refuse HA-DW with DAPO's dynamic sampling on a v1 trainer, unless the anchor is fixed (``config``: verl's)."""
    # verl internal (checked on verl 0.9.0, 0.9.1): the v1 replay buffer drops the all-correct and all-wrong groups
    # in ReplayBuffer.sample, before the advantage, and no hook reports them (a custom sampler disables the filter)
    if config.algorithm.get("adv_estimator") != "hadw" or not drops_groups(config):
        return
    # without ``run``, read as written: a typo elsewhere in the section is another problem, reported on its own
    mode = run.hadw.anchor.mode if run is not None else (
        ((config.algorithm.get("hadw") or {}).get("anchor") or {}).get("mode"))
    if mode != "fixed":  # a fixed anchor never reads y_t
        raise ConfigError(
            "algorithm.adv_estimator=hadw cannot run with algorithm.filter_groups.enable=true: verl drops the "
            "all-correct and all-wrong groups before the estimator, so the anchor would be biased toward 0.5. Set "
            "algorithm.filter_groups.enable=false, use algorithm.adv_estimator=dgpo, or "
            "+algorithm.hadw.anchor.mode=fixed.")


def check_dgpo_options_under_gdpo(algorithm: Any) -> None:
    """Refuse verl's ``gdpo`` estimator (multi-reward GDPO) with ``algorithm.dgpo.*`` set, which it never reads."""
    gdpo = hasattr(algorithm, "get") and algorithm.get("adv_estimator") == "gdpo"
    if dgpo := set_keys(section_of(algorithm, "dgpo"), "algorithm.dgpo") if gdpo else []:
        raise ConfigError(
            f"algorithm.adv_estimator=gdpo with {', '.join(dgpo)} set: did you mean algorithm.adv_estimator=dgpo? "
            "verl's gdpo (GDPO, multi-reward normalisation) never reads algorithm.dgpo; set "
            "algorithm.adv_estimator=dgpo, or remove the algorithm.dgpo options to train GDPO.")
