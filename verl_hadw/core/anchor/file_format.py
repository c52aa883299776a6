"""The anchor file ``{"global_step": N, "state_key": ..., "options": {...}, "state": AnchorState.to_dict()}``: its
checked read (everything a hand edit, a foreign writer or an interrupted save can get wrong, and the step) and its
atomic write."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import glob
import json
import math
import os
import stat

from verl_hadw.core.anchor.compatibility import declared_options
from verl_hadw.core.anchor.machine import SCHEMA_VERSION, AnchorState
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


def _field_problems(s: dict, units: str) -> list[str]:
    """What is out of type or range in a saved ``AnchorState.to_dict()`` ``s``; ``units``: ``accuracy`` (values in
    [0, 1]), or ``reward`` (mean rewards: any finite number)."""
    accuracy, opened, count, correct, calls, past = (units == "accuracy", s["open_step"] is not None, s["count"],
                                                     s["correct"], s["calls"], s["posteriors"])
    in_range = (lambda v: _is_num(v) and 0.0 <= v <= 1.0) if accuracy else _is_num
    one, many = ("a number in [0, 1]", "numbers in [0, 1]") if accuracy else ("a finite number", "finite numbers")
    lists = {k: isinstance(s[k], list) and all(map(in_range, s[k])) for k in ("posteriors", "accuracies")}
    checks = [
        (not opened or _is_int(s["open_step"], 1), f"open_step={s['open_step']!r} (expected null or an integer >= 1)"),
        (_is_int(count, int(opened)), f"count={count!r} (expected an integer >= {int(opened)})"),
        (_is_num(correct) and (not accuracy or 0 <= correct <= (count if _is_int(count, 0) else math.inf)),
         f"correct={correct!r} (expected " + ("a number in [0, count])" if accuracy else
                                              "a finite number: the open step's sum of rewards)")),
        (in_range(s["prior"]) if opened else s["prior"] is None,
         f"prior={s['prior']!r} (expected {one} with an open step, else null)"),
        (isinstance(calls, list) and all(_is_int(c, 0) for c in calls) and len(set(calls)) == len(calls),
         f"calls={calls!r} (expected a list of distinct integers >= 0)"),
        *((ok, f"{k}={s[k]!r} (expected a list of {many})") for k, ok in lists.items()),
        (not all(lists.values()) or len(past) == len(s["accuracies"]),
         "posteriors and accuracies differ in length (they are committed together)"),
        (_is_int(s["committed_steps"], len(past) if isinstance(past, list) else 0),
         f"committed_steps={s['committed_steps']!r} (expected an integer >= len(posteriors))"),
        (isinstance(s["warned_frozen"], bool), f"warned_frozen={s['warned_frozen']!r} (expected true or false)"),
        (isinstance(s["config"], dict), f"config={s['config']!r} (expected an object)"),
    ]
    return [problem for ok, problem in checks if not ok]


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def read_bounded(path: str, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` (``MAX_FILE_BYTES``); else a ValueError saying what is
    wrong: a FIFO, a device such as /dev/zero or a directory (opened without blocking), too large, unreadable."""
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
        raw = bytearray()
        while len(raw) <= limit and info.st_size <= limit:  # a file may still grow while it is read: bounded anyway
            if not (chunk := os.read(fd, min(1 << 20, limit + 1 - len(raw)))):
                break
            raw += chunk
    except OSError as exc:
        raise ValueError(f"cannot be read ({exc.strerror or exc})") from exc
    finally:
        os.close(fd)
    if len(raw) > limit or info.st_size > limit:
        raise ValueError(f"is larger than {limit} bytes, far more than any anchor file holds: it is not one")
    return bytes(raw)


def read_json(path: str):
    """The JSON in the file ``path``, read by ``read_bounded``; a ValueError saying what is wrong."""
    raw = read_bounded(path)
    if not raw.strip():
        raise ValueError(f"is empty ({len(raw)} bytes): the save that wrote it was interrupted")
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
    saved = read_json(path)
    if not isinstance(saved, dict):
        raise ValueError(f"holds {_JSON_TYPES.get(type(saved), 'null')} where an object is expected")
    if missing := sorted({"global_step", "state_key", "options", "state"} - saved.keys()):
        raise ValueError(f"lacks the key(s) {', '.join(missing)}")
    state, options, bad = saved["state"], saved["options"], []
    # the file of a run under another estimator holds its options only
    anchor = state is not None or not isinstance(options, dict) or options.get(_ESTIMATOR) in (None, "hadw")
    if anchor:
        if not isinstance(state, dict):
            raise ValueError(f"has a 'state' that is not an object ({state!r:.60})")
        if state.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"has anchor schema_version {state.get('schema_version')!r} but this verl-hadw reads "
                             f"version {SCHEMA_VERSION} (written by another verl-hadw version?)")
        if missing := sorted(_STATE_FIELDS - state.keys()):
            raise ValueError(f"lacks the key(s) {', '.join('state.' + k for k in missing)}")
        bad = _field_problems(state, saved_units(saved)) + [f"unknown key state.{k}" for k in
                                                             sorted(state.keys() - _STATE_FIELDS)]
    if not isinstance(options, dict):
        bad.append(f"options={options!r:.60} (expected an object)")
    elif missing := [k for k in declared_options() if k not in options]:
        bad.append(f"options without {', '.join(missing)} (every file records every option)")
    if not _is_int(saved["global_step"], 1) or not isinstance(saved["state_key"], str):
        bad.append(f"global_step={saved['global_step']!r}, state_key={saved['state_key']!r} (an integer >= 1, "
                   "a string)")
    if bad:
        raise ValueError(f"has invalid fields: {'; '.join(bad)}")
    if saved["global_step"] != step or (anchor and state["open_step"] not in (None, step)):
        anchor_step = f" (anchor step {state['open_step']})" if anchor else ""
        raise ValueError(f"belongs to step {saved['global_step']}{anchor_step} but {resumer} resumes from step {step}: "
                         "the file was copied from another checkpoint")
    return saved


def write_state_file(path: str, payload: dict, terms: Terms) -> None:
    """Write ``payload`` to ``path`` atomically (a temp file, fsync, rename); on an OS error, remove the temp file and
    raise ``AnchorSaveError`` naming the folder, the cause and the way on."""
    checkpoint_dir = os.path.dirname(path)
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        os.makedirs(checkpoint_dir, exist_ok=True)
        for dead in glob.glob(f"{glob.escape(path)}.tmp.*"):  # the temporary files of a killed save
            with contextlib.suppress(FileNotFoundError):
                os.remove(dead)
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
            f"{_save_problem(exc, path)}; no partial {os.path.basename(path)} was left. {terms.framework} may already "
            "list this checkpoint as the latest, and resuming from it stops for the missing anchor: fix the cause and "
            f"{terms.resume_elsewhere}, or {terms.allow_missing_state}.") from exc


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
