"""``trainer.checkpoint_callback_class=verl_hadw.callback.HadwCheckpointCallback`` (verl's v1 trainer).

verl builds this callback in its driver inside ``PPOTrainer.__init__``, before the workers start and before
it loads its own checkpoint. That makes the constructor the plugin's fail-fast point and its restore point:

1. validate ``algorithm.hadw`` / ``algorithm.dgpo`` and check that ``algorithm.adv_estimator`` is registered
   (verl hides plugin import errors and only looks the estimator up at the first training step);
2. resolve the resume directory exactly as verl's ``_load_checkpoint`` does and restore the anchor from
   ``global_step_N/verl_hadw_anchor.json`` into its Ray actor, checking the saved step against N.

``on_save`` writes the anchor state atomically (temp file + rename) into each ``global_step_N`` directory.
A damaged file on resume (unreadable, empty, truncated, wrong JSON type, unknown schema, missing or out-of-range
fields, another step's) ends in one ``AnchorFileError`` naming the file, the problem and the ways out.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import re

from verl.trainer.ppo.checkpoint_callback import CheckpointCallback

from verl_hadw import anchor_client, config_check, metrics
from verl_hadw.anchor import SCHEMA_VERSION, AnchorState
from verl_hadw.options import AnchorConfig, ConfigError, parse_dgpo, parse_hadw

__all__ = [
    "HadwCheckpointCallback",
    "AnchorFileError",
    "AnchorSaveError",
    "STATE_FILE",
    "read_state_file",
    "resolve_resume_dir",
    "validate_config",
]

logger = logging.getLogger(__name__)

STATE_FILE = "verl_hadw_anchor.json"


def resolve_resume_dir(trainer_config) -> str | None:
    """The ``global_step_N`` folder verl's v1 ``_load_checkpoint`` will resume from, or None (fresh start)."""
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    mode = trainer_config.get("resume_mode", "auto")
    if mode == "disable":
        return None
    if mode == "auto":
        folder = trainer_config.default_local_dir
        if not os.path.isabs(folder):
            folder = os.path.join(os.getcwd(), folder)
        return find_latest_ckpt_path(folder)
    if mode == "resume_path":
        path = trainer_config.get("resume_from_path")
        if not isinstance(path, str) or "global_step_" not in path:
            raise ConfigError(f"trainer.resume_from_path must name a global_step_N folder, got {path!r}")
        return check_step_folder(path if os.path.isabs(path) else os.path.join(os.getcwd(), path), path)
    raise ConfigError(f"trainer.resume_mode={mode!r} is not valid; choose one of: auto, disable, resume_path")


_STEP_FOLDER = re.compile(r"global_step_(\d+)")


def check_step_folder(folder: str, given: str) -> str:
    """``folder`` if it is an existing ``.../global_step_N`` folder; else a ConfigError naming the one to use.

    verl reads N as ``int(path.split("global_step_")[-1])``, so a path inside a checkpoint
    (``.../global_step_4/actor``) or with a trailing slash ends in a raw ValueError in verl's trainer. It is
    refused here, before training, rather than resolved: verl would still read the original path.
    """
    if not folder.split("global_step_")[-1].isdigit():
        # the innermost .../global_step_N/ component, if the path goes inside one
        inside = [m for m in _STEP_FOLDER.finditer(folder) if folder[m.end() : m.end() + 1] in ("/", os.sep)]
        fix = f"set trainer.resume_from_path={folder[: inside[-1].end()]}" if inside else "name the folder itself"
        raise ConfigError(
            f"trainer.resume_from_path={given!r} does not end in a global_step_N folder (verl reads N from the "
            f"path's end): {fix}."
        )
    if not os.path.isdir(folder):
        raise ConfigError(f"trainer.resume_from_path={given!r}: no such checkpoint folder ({folder} does not exist).")
    return folder


def validate_config(config) -> str:
    """Parse both option nodes and check the estimator is registered; returns ``algorithm.adv_estimator``."""
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    import verl_hadw.register  # noqa: F401  (registers even where the entry point was disabled or failed)

    algorithm = config.algorithm
    parse_hadw(algorithm)
    parse_dgpo(algorithm)
    config_check.check_algorithm(algorithm, config)  # near-miss sections raise; unused options warn
    estimator = algorithm.get("adv_estimator", "gae")
    try:
        get_adv_estimator_fn(estimator)
    except ValueError as exc:
        raise ConfigError(f"algorithm.adv_estimator={estimator!r} is not a registered estimator ({exc})") from exc
    return estimator


def _step_of(folder: str) -> int:
    return int(os.path.basename(os.path.normpath(folder)).split("global_step_")[-1])


class AnchorFileError(anchor_client.MissingAnchorStateError):
    """A resume found ``verl_hadw_anchor.json`` but cannot use it: unreadable, corrupt, truncated, of an unknown
    schema, with missing or out-of-range fields, or saved at another step. The message names the file, the
    problem and the ways out."""


class AnchorSaveError(RuntimeError):
    """``on_save`` could not write the anchor file (disk full, read-only, ...); no partial file is left."""


# ------------------------------------------------------------------------------------- reading a state file
_JSON_TYPES = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}
_STATE_FIELDS = {f.name for f in dataclasses.fields(AnchorState)} | {"schema_version"}


def _is_int(v, lo: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= lo


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_prob(v) -> bool:
    return _is_num(v) and 0.0 <= v <= 1.0


def _field_problems(state: dict) -> list[str]:
    """What is out of type or range in a saved ``AnchorState.to_dict()`` (hand edits, foreign writers)."""
    bad = []
    open_step, count = state["open_step"], state["count"]
    if open_step is not None and not _is_int(open_step, 1):
        bad.append(f"open_step={open_step!r} (expected null or an integer >= 1)")
    if not _is_int(count, 1 if open_step is not None else 0):
        bad.append(f"count={count!r} (expected an integer >= {1 if open_step is not None else 0})")
    correct = state["correct"]
    if not (_is_num(correct) and 0 <= correct <= (count if _is_int(count, 0) else math.inf)):
        bad.append(f"correct={correct!r} (expected a number in [0, count])")
    prior = state["prior"]
    if (open_step is None and prior is not None) or (open_step is not None and not _is_prob(prior)):
        bad.append(f"prior={prior!r} (expected a number in [0, 1] with an open step, else null)")
    calls = state["calls"]
    if not isinstance(calls, list) or not all(_is_int(c, 0) for c in calls) or len(set(calls)) != len(calls):
        bad.append(f"calls={calls!r} (expected a list of distinct integers >= 0)")
    for key in ("posteriors", "accuracies"):
        if not isinstance(state[key], list) or not all(_is_prob(v) for v in state[key]):
            bad.append(f"{key}={state[key]!r} (expected a list of numbers in [0, 1])")
    if not bad and len(state["posteriors"]) != len(state["accuracies"]):
        bad.append("posteriors and accuracies differ in length (they are committed together)")
    if not _is_int(state["committed_steps"], len(state["posteriors"]) if isinstance(state["posteriors"], list) else 0):
        bad.append(f"committed_steps={state['committed_steps']!r} (expected an integer >= len(posteriors))")
    if not isinstance(state["warned_frozen"], bool):
        bad.append(f"warned_frozen={state['warned_frozen']!r} (expected true or false)")
    if not isinstance(state["config"], dict):
        bad.append(f"config={state['config']!r} (expected an object)")
    return bad


def read_state_file(path: str, step: int) -> dict:
    """The checked payload of ``path`` for a resume from ``global_step_{step}``.

    Raises ValueError saying what is wrong with the file (the caller adds the path and the ways out).
    """
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise ValueError(f"cannot be read ({exc.strerror or exc})") from exc
    if not raw.strip():
        raise ValueError(f"is empty ({len(raw)} bytes): the save that wrote it was interrupted")
    try:
        saved = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"is not valid JSON, truncated or corrupt ({exc})") from exc
    if not isinstance(saved, dict):
        raise ValueError(f"holds {_JSON_TYPES.get(type(saved), 'null')} where an object is expected")
    missing = sorted({"global_step", "state_key", "state"} - saved.keys())
    state = saved.get("state")
    if not missing and not isinstance(state, dict):
        raise ValueError(f"has a 'state' that is not an object ({state!r:.60})")
    version = state.get("schema_version") if isinstance(state, dict) else None
    if not missing and version != SCHEMA_VERSION:
        raise ValueError(
            f"has anchor schema_version {version!r} but this verl-hadw reads version {SCHEMA_VERSION} "
            "(written by another verl-hadw version?)"
        )
    if isinstance(state, dict):
        missing += sorted(f"state.{k}" for k in _STATE_FIELDS - state.keys())
    if missing:
        raise ValueError(f"lacks the key(s) {', '.join(missing)}")
    unknown = sorted(state.keys() - _STATE_FIELDS)
    bad = _field_problems(state) + [f"unknown key state.{k}" for k in unknown]
    if not _is_int(saved["global_step"], 1) or not isinstance(saved["state_key"], str):
        bad.append(
            f"global_step={saved['global_step']!r}, state_key={saved['state_key']!r} (an integer >= 1, a string)"
        )
    if bad:
        raise ValueError(f"has invalid fields: {'; '.join(bad)}")
    if saved["global_step"] != step or state["open_step"] not in (None, step):
        raise ValueError(
            f"belongs to step {saved['global_step']} (anchor step {state['open_step']}) but verl resumes from "
            f"step {step}: the file was copied from another checkpoint"
        )
    return saved


def earlier_valid_checkpoint(folder: str) -> str | None:
    """The newest other ``global_step_K`` (K < N) beside ``folder`` that verl can resume (``actor/`` present)
    and whose anchor file is valid, or None."""
    parent, step = os.path.dirname(os.path.normpath(folder)), _step_of(folder)
    try:
        names = os.listdir(parent)
    except OSError:
        return None
    steps = sorted((int(n[12:]) for n in names if n.startswith("global_step_") and n[12:].isdigit()), reverse=True)
    for k in (k for k in steps if k < step):
        candidate = os.path.join(parent, f"global_step_{k}")
        if not os.path.isdir(os.path.join(candidate, "actor")):
            continue
        try:
            read_state_file(os.path.join(candidate, STATE_FILE), k)
        except ValueError:
            continue
        return candidate
    return None


def config_changes(saved: dict, current: AnchorConfig) -> list[str]:
    """``key: old -> new`` for every anchor option that differs between a saved state and this run."""
    now = dataclasses.asdict(current)
    return [f"{k}: {saved[k]!r} -> {now[k]!r}" for k in now if k in saved and saved[k] != now[k]]


# --------------------------------------------------------------------------------------------- the callback
class HadwCheckpointCallback(CheckpointCallback):
    """Validates the config, restores the HA-DW anchor on resume, and saves it with every verl checkpoint.

    A resume whose anchor config differs from the saved one (e.g. ``eta`` raised after a freeze warning,
    ``window`` changed) keeps the anchor's history and continues under this run's config, with a warning
    naming each changed key (old -> new). The history (C⁺ and y_t of past steps) is data about the run, valid
    under any config; the freeze warning itself tells users to change ``eta``/``eta_min``/``sigma_source``, so
    refusing would block the advice. A smaller window trims the kept history to ``window + 1`` values
    (only those are ever read); a larger one keeps what was saved and fills up as steps commit.
    """

    def __init__(self, config=None):
        super().__init__(config)
        self.estimator = validate_config(config)
        self.hadw = parse_hadw(config.algorithm)
        metrics.enable(self.hadw.log_metrics)
        self.restored_step: int | None = None
        if self.estimator == "hadw":
            self._restore(resolve_resume_dir(config.trainer))

    def _fail(self, folder: str, message: str, error: type[RuntimeError]) -> None:
        """Raise ``message`` plus the ways out, or (allow_missing_state) warn and start a fresh anchor."""
        earlier = earlier_valid_checkpoint(folder)
        where = (
            f"{earlier}, the newest earlier checkpoint with a valid anchor file (trainer.resume_mode=resume_path "
            f"trainer.resume_from_path={earlier})"
            if earlier
            else f"an earlier global_step_N folder whose {STATE_FILE} is valid (none found beside {folder})"
        )
        message = (
            f"{message}. Ways out: resume from {where}; or set +algorithm.hadw.allow_missing_state=true to "
            "continue with a fresh anchor."
        )
        if not self.hadw.allow_missing_state:
            raise error(message)
        logger.warning(f"{message} (allow_missing_state=true: continuing with a fresh anchor)")
        anchor_client.restore(self.hadw, None)

    def _restore(self, folder: str | None) -> None:
        if folder is None:
            anchor_client.restore(self.hadw, None)  # fresh run: an explicit start
            return
        step = _step_of(folder)
        path = os.path.join(folder, STATE_FILE)
        if not os.path.exists(path):
            return self._fail(
                folder,
                f"resuming from {folder} but it holds no HA-DW anchor ({STATE_FILE}): that checkpoint was not "
                "written with trainer.checkpoint_callback_class=verl_hadw.callback.HadwCheckpointCallback",
                anchor_client.MissingAnchorStateError,
            )
        try:
            saved, problem = read_state_file(path, step), None
        except ValueError as exc:
            problem = str(exc)
        if problem is not None:  # raised outside the except: one error, not a chain ending in a JSONDecodeError
            return self._fail(folder, f"cannot restore the HA-DW anchor: {path} {problem}", AnchorFileError)
        if saved["state_key"] != self.hadw.state_key:
            logger.warning(f"restoring anchor '{saved['state_key']}' as algorithm.hadw.state_key='{self.hadw.state_key}'")
        state, current = dict(saved["state"]), self.hadw.anchor
        changed = config_changes(state["config"], current)
        if changed:
            logger.warning(
                f"{path} was saved under another algorithm.hadw.anchor config ({'; '.join(changed)}): the anchor "
                "keeps its history and continues under this run's config"
            )
        keep = current.window + 1  # what AnchorState keeps: m values for σ_t, one more for the freeze check
        state.update(
            config=dataclasses.asdict(current),
            posteriors=state["posteriors"][-keep:],
            accuracies=state["accuracies"][-keep:],
        )
        anchor_client.restore(self.hadw, state)
        self.restored_step = step
        logger.info(f"HA-DW anchor restored from {path} (step {step})")

    def on_save(self, trainer, global_step: int, checkpoint_dir: str, async_save: bool = False, **kwargs) -> None:
        if self.estimator != "hadw":
            return
        state = anchor_client.state_dict(self.hadw)
        if state["open_step"] not in (None, global_step):
            logger.warning(f"saving anchor at verl step {global_step} but the anchor's last step is {state['open_step']}")
        payload = {"global_step": global_step, "state_key": self.hadw.state_key, "state": state}
        write_state_file(os.path.join(checkpoint_dir, STATE_FILE), payload)


def write_state_file(path: str, payload: dict) -> None:
    """Write ``payload`` to ``path`` atomically: a temp file, fsync, rename (both trainers' anchor files).

    On any OS error the temp file is removed (an existing anchor file stays as it was) and AnchorSaveError
    names the directory and the way on.
    """
    checkpoint_dir = os.path.dirname(path)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        os.makedirs(checkpoint_dir, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.remove(tmp)
        except OSError:
            pass  # never created, or already renamed
        raise AnchorSaveError(
            f"could not write the HA-DW anchor into {checkpoint_dir} ({exc.strerror or exc}): the directory is "
            f"full or not writable; no partial {os.path.basename(path)} was left. verl may already list this checkpoint as the "
            "latest, and resuming from it stops for the missing anchor: free space or fix the permissions and "
            "resume from the previous checkpoint (trainer.resume_mode=resume_path), or set "
            "+algorithm.hadw.allow_missing_state=true to continue with a fresh anchor."
        ) from exc
