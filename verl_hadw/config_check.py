"""Config checks around ``algorithm.hadw`` / ``algorithm.dgpo`` that the option parser cannot see.

verl ignores keys it does not know, so a misspelt section (``+algorithm.hadww.lambda_scale=1.5``, ``algorithm.HADW``,
``algorithm.dpgo``), an option one level too high (``+algorithm.lambda_scale``) or a section at the config root
(``+hadw.lambda_scale``) would silently leave the run on the defaults: each is a ``ConfigError`` with "did you mean".
Options of an estimator that is not selected (``algorithm.hadw.*`` under ``adv_estimator=dgpo``) are legal but have
no effect: a warning names them. Pure Python (omegaconf only), run before training by the checkpoint callback.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import logging
import re
import warnings
from typing import Any, Mapping

from verl_hadw.errors import CALLBACK_OVERRIDE, ConfigError, UnusedOptionsWarning
from verl_hadw.options import DgpoConfig, HadwConfig, algorithm_node
from verl_hadw.process_state import PROCESS

__all__ = [
    "check_sections", "unused_options", "warn_unused_options", "check_algorithm", "UnusedOptionsWarning",
    "unsaved_anchor", "warn_unsaved_anchor",
]

SECTIONS = {"hadw": HadwConfig, "dgpo": DgpoConfig}


def _option_names(cls: type) -> list[str]:
    names = []
    for f in dataclasses.fields(cls):
        if f.metadata.get("kind") == "section":
            names += _option_names(f.default_factory)
        elif "kind" in f.metadata:
            names.append(f.name)
    return names


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
    names = [name for cls in SECTIONS.values() for name in _option_names(cls)]
    return any(difflib.get_close_matches(str(k), names, n=1, cutoff=0.8) for k in node)


def check_sections(algorithm: Any, root: Any = None) -> None:
    """Raise ``ConfigError`` for a near-miss section name or a misplaced option (see the module docstring).

    ``algorithm``: verl's ``algorithm`` node; ``root``: the full config, to look at its top-level keys too.
    """
    node = algorithm_node({"a": algorithm}, "a")
    verl_keys = _verl_algorithm_keys()
    options = {name: section for section, cls in SECTIONS.items() for name in _option_names(cls)}
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
    top = algorithm_node({"r": root}, "r") if root is not None else {}
    for key in top:
        section = _near_section(key) if _squash(key) != "algorithm" else None
        if section is not None and (_squash(key) == section or _looks_like(top[key])):
            raise ConfigError(
                f"Unknown top-level section '{key}': did you mean 'algorithm.{section}'? The estimators read their "
                f"options from algorithm.{section} only."
            )


def _set_keys(node: Mapping, prefix: str) -> list[str]:
    keys = []
    for key, value in node.items():
        if isinstance(value, Mapping) and value:
            keys += _set_keys(value, f"{prefix}.{key}")
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
    hadw, dgpo = algorithm_node(algorithm, "hadw"), algorithm_node(algorithm, "dgpo")
    unused = []
    if estimator != "hadw":
        shared = {"algorithm.hadw.state_key"}  # names the anchor: every shipped base config sets it
        if estimator == "dgpo":
            shared.add("algorithm.hadw.log_metrics")
        unused += [k for k in _set_keys(hadw, "algorithm.hadw") if k not in shared]
    if estimator not in ("hadw", "dgpo"):
        unused += _set_keys(dgpo, "algorithm.dgpo")
    elif estimator == "hadw" and hadw.get("base", "grpo") != "dgpo":
        unused += _set_keys(dgpo, "algorithm.dgpo")
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
_CALLBACK = CALLBACK_OVERRIDE.split("=", 1)[1]


def _trainer_of(algorithm: Any, root: Any = None) -> Any:
    """verl's ``trainer`` node: ``root.trainer``, or found from the ``algorithm`` node's parent (None: unknown)."""
    if root is not None:
        return root.get("trainer") if hasattr(root, "get") else None
    from omegaconf import DictConfig, OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    if not isinstance(algorithm, DictConfig):
        return None
    try:
        return OmegaConf.select(algorithm, "..trainer", default=None)
    except OmegaConfBaseException:  # a detached node (unit use)
        return None


def _is_our_callback(name: Any) -> bool:
    if name == _CALLBACK:
        return True
    if not isinstance(name, str) or not name:
        return False
    try:  # a subclass of ours saves the anchor too
        from verl.utils.import_utils import load_class_from_fqn

        mro = load_class_from_fqn(name).__mro__
    except Exception:  # verl reports a class it cannot load itself
        return False
    return any(f"{c.__module__}.{c.__qualname__}" == _CALLBACK for c in mro)


def unsaved_anchor(algorithm: Any, root: Any = None) -> str | None:
    """The warning for an HA-DW run on verl's v1 trainer that saves checkpoints (``trainer.save_freq > 0``) without
    the checkpoint callback: its anchor is in no checkpoint, so a resume stops for it. None when that is not so."""
    estimator = algorithm.get("adv_estimator", "gae") if hasattr(algorithm, "get") else None
    trainer = _trainer_of(algorithm, root)
    if estimator != "hadw" or trainer is None or not hasattr(trainer, "get"):
        return None
    save_freq = trainer.get("save_freq", -1)
    if trainer.get("use_v1", True) is False or not isinstance(save_freq, int) or save_freq <= 0:
        return None
    if _is_our_callback(trainer.get("checkpoint_callback_class", None)):
        return None
    return (
        f"HA-DW runs on verl's v1 trainer with checkpoints every {save_freq} steps (trainer.save_freq) but without "
        f"the plugin's checkpoint callback: the anchor is saved in no checkpoint, so resuming from one stops for "
        f"the missing anchor (or starts a fresh one with allow_missing_state). Set {CALLBACK_OVERRIDE}."
    )


def warn_unsaved_anchor(algorithm: Any, root: Any = None) -> str | None:
    """``unsaved_anchor``, as one ``UserWarning`` per process (the estimator checks it at every call)."""
    message = unsaved_anchor(algorithm, root)
    if message is not None and message not in PROCESS.warned:
        PROCESS.warned.add(message)
        warnings.warn(message, UserWarning, stacklevel=2)
        logging.getLogger(__name__).warning(message)
    return message
