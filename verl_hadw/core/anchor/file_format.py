"""The anchor file ``{"global_step": N, "state_key": ..., "options": {...}, "state": AnchorState.to_dict()}``: its
checked read (everything a hand edit, a foreign writer or an interrupted save can get wrong, and the step) and its
atomic write. Schema 1 files lack ``options``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import math
import os
import stat

from verl_hadw.core.anchor.machine import READABLE_SCHEMAS, AnchorState
from verl_hadw.core.errors import AnchorSaveError
from verl_hadw.core.terms import Terms

STATE_FILE = "verl_hadw_anchor.json"
# A real anchor file is a few kB (window + 1 values twice, the options); 64 MiB leaves space for windows of millions
# of steps, and stops a symlink to /dev/zero or a runaway file from being read without end.
MAX_FILE_BYTES = 64 * 1024 * 1024

_JSON_TYPES = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}
_STATE_FIELDS = {f.name for f in dataclasses.fields(AnchorState)} | {"schema_version"}
# the top-level keys this version writes (the last by the legacy back-end); others are a newer version's
PAYLOAD_KEYS = ("global_step", "state_key", "options", "state", "replaces_data_pt_mtime_ns")
_DIFFICULTY_FROM, _ESTIMATOR = "algorithm.hadw.difficulty_from", "algorithm.adv_estimator"


def payload(step: int, key: str, state: dict, options: dict) -> dict:
    """An anchor file's content: the anchor ``state`` after step ``step``, and the run's flat ``options``."""
    return {"global_step": step, "state_key": key, "options": options, "state": state}


def saved_units(saved: dict) -> str:
    """``accuracy`` or ``reward``: what the anchor's numbers in a checked payload measure."""
    options = saved.get("options")
    return "reward" if isinstance(options, dict) and options.get(_DIFFICULTY_FROM) == "reward" else "accuracy"


def _is_int(v, lo: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= lo


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _field_problems(state: dict, units: str) -> list[str]:
    """What is out of type or range in a saved ``AnchorState.to_dict()``; ``units``: ``accuracy`` (values in [0, 1]),
    or ``reward`` (mean rewards: any finite number)."""
    in_range, one, many = (
        (lambda v: _is_num(v) and 0.0 <= v <= 1.0, "a number in [0, 1]", "numbers in [0, 1]") if units == "accuracy"
        else (_is_num, "a finite number", "finite numbers")
    )
    bad = []
    open_step, count = state["open_step"], state["count"]
    if open_step is not None and not _is_int(open_step, 1):
        bad.append(f"open_step={open_step!r} (expected null or an integer >= 1)")
    if not _is_int(count, 1 if open_step is not None else 0):
        bad.append(f"count={count!r} (expected an integer >= {1 if open_step is not None else 0})")
    correct = state["correct"]
    if units == "reward" and not _is_num(correct):
        bad.append(f"correct={correct!r} (expected a finite number: the open step's sum of rewards)")
    if units == "accuracy" and not (_is_num(correct) and 0 <= correct <= (count if _is_int(count, 0) else math.inf)):
        bad.append(f"correct={correct!r} (expected a number in [0, count])")
    prior = state["prior"]
    if (open_step is None and prior is not None) or (open_step is not None and not in_range(prior)):
        bad.append(f"prior={prior!r} (expected {one} with an open step, else null)")
    calls = state["calls"]
    if not isinstance(calls, list) or not all(_is_int(c, 0) for c in calls) or len(set(calls)) != len(calls):
        bad.append(f"calls={calls!r} (expected a list of distinct integers >= 0)")
    for key in ("posteriors", "accuracies"):
        if not isinstance(state[key], list) or not all(in_range(v) for v in state[key]):
            bad.append(f"{key}={state[key]!r} (expected a list of {many})")
    if not bad and len(state["posteriors"]) != len(state["accuracies"]):
        bad.append("posteriors and accuracies differ in length (they are committed together)")
    committed_min = len(state["posteriors"]) if isinstance(state["posteriors"], list) else 0
    if not _is_int(state["committed_steps"], committed_min):
        bad.append(f"committed_steps={state['committed_steps']!r} (expected an integer >= len(posteriors))")
    if not isinstance(state["warned_frozen"], bool):
        bad.append(f"warned_frozen={state['warned_frozen']!r} (expected true or false)")
    if not isinstance(state["config"], dict):
        bad.append(f"config={state['config']!r} (expected an object)")
    return bad


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def read_bounded(path: str, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` (``MAX_FILE_BYTES``); a ValueError saying what is
    wrong otherwise: a FIFO, a device such as /dev/zero or a directory (opened without blocking), too large, unreadable.
    """
    limit = MAX_FILE_BYTES if limit is None else limit
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        link = f", a symbolic link to {os.readlink(path)!r}" if os.path.islink(path) else ""  # dangling, or a loop
        raise ValueError(f"cannot be read ({exc.strerror or exc}{link})") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
            raise ValueError(f"is {kind}, not a regular file: only a regular file is read as an anchor file")
        chunks, size = [], 0
        while size <= limit and info.st_size <= limit:  # a file may still grow while it is read: bounded anyway
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        raw = b"".join(chunks)
    except OSError as exc:
        raise ValueError(f"cannot be read ({exc.strerror or exc})") from exc
    finally:
        os.close(fd)
    if len(raw) > limit or info.st_size > limit:
        raise ValueError(f"is larger than {limit} bytes, far more than any anchor file holds: it is not one")
    return raw


def read_json(raw: bytes):
    """``raw`` (bytes of an anchor file) parsed as JSON; ValueError saying what is wrong."""
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError:
        raise ValueError("nests arrays or objects deeper than a JSON reader can follow: it is not an anchor file") \
            from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"is not valid JSON, truncated or corrupt ({exc})") from exc


def read_state_file(path: str, step: int, terms: Terms | None = None) -> dict:
    """The checked payload of ``path`` for a resume from step ``step`` (``state`` null only in the file of a run under
    another estimator); a ValueError saying what is wrong, the caller adds the path and the ways out. ``terms``: the
    resuming framework's (None: a reader that only asks whether the file is valid)."""
    resumer = terms.framework if terms is not None else "the trainer"
    raw = read_bounded(path)
    if not raw.strip():
        raise ValueError(f"is empty ({len(raw)} bytes): the save that wrote it was interrupted")
    saved = read_json(raw)
    if not isinstance(saved, dict):
        raise ValueError(f"holds {_JSON_TYPES.get(type(saved), 'null')} where an object is expected")
    missing = sorted({"global_step", "state_key", "state"} - saved.keys())
    state = saved.get("state")
    options = saved.get("options")
    if not missing and state is None and isinstance(options, dict) and options.get(_ESTIMATOR) not in (None, "hadw"):
        # the file of a run under another estimator: its options only
        if not _is_int(saved["global_step"], 1) or not isinstance(saved["state_key"], str):
            raise ValueError(
                f"has invalid fields: global_step={saved['global_step']!r}, state_key={saved['state_key']!r}")
        if saved["global_step"] != step:
            raise ValueError(f"belongs to step {saved['global_step']} but {resumer} resumes from step {step}: the file "
                             "was copied from another checkpoint")
        return saved
    if not missing and not isinstance(state, dict):
        raise ValueError(f"has a 'state' that is not an object ({state!r:.60})")
    version = state.get("schema_version") if isinstance(state, dict) else None
    if not missing and version not in READABLE_SCHEMAS:
        raise ValueError(f"has anchor schema_version {version!r} but this verl-hadw reads version "
                         f"{' or '.join(map(str, READABLE_SCHEMAS))} (written by another verl-hadw version?)")
    if isinstance(state, dict):
        missing += sorted(f"state.{k}" for k in _STATE_FIELDS - state.keys())
    if version != 1 and "options" not in saved:
        missing.append("options")
    if missing:
        raise ValueError(f"lacks the key(s) {', '.join(missing)}")
    unknown = sorted(state.keys() - _STATE_FIELDS)
    bad = _field_problems(state, saved_units(saved)) + [f"unknown key state.{k}" for k in unknown]
    if "options" in saved and not isinstance(saved["options"], dict):
        bad.append(f"options={saved['options']!r:.60} (expected an object)")
    if not _is_int(saved["global_step"], 1) or not isinstance(saved["state_key"], str):
        step_key = f"global_step={saved['global_step']!r}, state_key={saved['state_key']!r}"
        bad.append(f"{step_key} (an integer >= 1, a string)")
    if bad:
        raise ValueError(f"has invalid fields: {'; '.join(bad)}")
    if saved["global_step"] != step or state["open_step"] not in (None, step):
        raise ValueError(
            f"belongs to step {saved['global_step']} (anchor step {state['open_step']}) but {resumer} resumes from "
            f"step {step}: the file was copied from another checkpoint"
        )
    return saved


def write_state_file(path: str, payload: dict, terms: Terms) -> None:
    """Write ``payload`` to ``path`` atomically (a temp file, fsync, rename); on an OS error, remove the temp file and
    raise ``AnchorSaveError`` naming the folder, the cause and the way on."""
    checkpoint_dir = os.path.dirname(path)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        os.makedirs(checkpoint_dir, exist_ok=True)
        _remove_dead_temporaries(path)
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):  # never created, or already renamed
            os.remove(tmp)
        raise AnchorSaveError(
            f"could not write the HA-DW anchor into {checkpoint_dir} ({exc.strerror or exc}): "
            f"{_save_problem(exc, path)}; no partial {os.path.basename(path)} was left. {terms.framework} may "
            "already list this checkpoint as the latest, and "
            f"resuming from it stops for the missing anchor: fix the cause and {terms.resume_elsewhere}, or "
            f"{terms.allow_missing_state}."
        ) from exc


def _remove_dead_temporaries(path: str) -> None:
    """Remove the temporary files a killed save of ``path`` left (``<file>.tmp.<pid>``)."""
    folder, prefix = os.path.dirname(path), f"{os.path.basename(path)}.tmp."
    for name in os.listdir(folder):
        if name.startswith(prefix):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(folder, name))


def _save_problem(exc: OSError, path: str) -> str:
    where = exc.filename or os.path.dirname(path)
    causes = {  # what went wrong, in words that say what to fix
        errno.ENOSPC: "the disk is full",
        errno.EDQUOT: "the disk quota is used up",
        errno.EACCES: f"{where} is not writable (permissions)",
        errno.EPERM: f"{where} is not writable (permissions)",
        errno.EROFS: f"{where} is on a read-only file system",
        errno.EISDIR: f"{path} is a directory, where the anchor file belongs: remove or rename it",
        errno.EEXIST: f"{where} exists but is not a directory: a file stands where a folder of the path belongs",
        errno.ENOTDIR: f"a part of {where} is a file, not a directory",
    }
    return causes.get(exc.errno, "the operating system refused the write")
