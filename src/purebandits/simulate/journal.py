"""A journal of finished chunks, so that a long :func:`~purebandits.simulate.simulate` call resumes.

A paper-scale reproduction can need tens of core-hours: more than one working session, and a
killed process would otherwise lose everything. With ``simulate(..., journal=DIR)`` every finished
chunk of repetitions is written to ``DIR/<key>/reps-<first>-<last>.npz`` (atomically: a temporary
file renamed into place); a later call with the same inputs loads those repetitions and runs only
the missing ones.

Why this is exact: a repetition's result depends only on the learner's class and parameters, the
reward model, the root seed, its index r, the checkpoints, the cap and the driver (see
:mod:`purebandits.simulate.engine`), never on the chunking, the executor or the number of
repetitions asked for. The key is a SHA-256 of exactly those inputs and the package version, so
a journal written with ``reps=100, jobs=8`` serves ``reps=200, jobs=1``.

What the key cannot see is a change to the code of a learner at the same version: clear the
journal (delete the directory) after changing an algorithm's decisions.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Journal", "JOURNAL_FIELDS", "JournalTask"]

#: the per-repetition arrays of a chunk (rows in the order of its "reps" array)
JOURNAL_FIELDS = ("pulls", "stopped", "recommended", "correct", "counts", "ckpt_recommended",
                  "ckpt_correct", "ckpt_best_rank", "ckpt_topk_rank")

_CHUNK_FILE = re.compile(r"^reps-(\d+)-(\d+)\.npz$")
#: what reading a damaged chunk file raises (a zip cut short raises BadZipFile, not an OSError)
_UNREADABLE = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)


def _canonical(obj: Any) -> Any:
    """A JSON-able, order-stable form of learner parameters (floats kept exactly via repr)."""
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, list | tuple):
        return [_canonical(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return {"ndarray": obj.dtype.str, "shape": list(obj.shape), "sha256": hashlib.sha256(obj.tobytes()).hexdigest()}
    if isinstance(obj, bool | int | str) or obj is None:
        return obj
    if isinstance(obj, float | np.floating):
        return repr(float(obj))
    if isinstance(obj, np.integer):
        return int(obj)
    return f"{type(obj).__module__}.{type(obj).__qualname__}:{obj!r}"


def task_key(task: Any) -> str:
    """SHA-256 of every input a repetition's result depends on (see the module docstring)."""
    from purebandits import __version__

    model = task.model
    h = hashlib.sha256()
    learner_cls = type(task.learner)
    head = {"version": __version__, "learner": f"{learner_cls.__module__}.{learner_cls.__qualname__}",
            "params": _canonical(task.learner.get_params()), "model": type(model).__qualname__,
            "kind": int(model.kind), "seed": int(task.seed), "k": int(task.k), "max_pulls": int(task.max_pulls),
            "driver": task.driver}
    h.update(json.dumps(head, sort_keys=True).encode())
    for arr in (model.a, model.b, model.cdf, model.values, np.asarray(task.checkpoints, dtype=np.int64)):
        a = np.ascontiguousarray(arr)
        h.update(f"|{a.dtype.str}{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _write_atomic(path: Path, write: Callable[[Any], None]) -> None:
    """``write(fh)`` into a temporary file, synced, then renamed to ``path``: never half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        write(fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _read_chunks(d: Path, fields: tuple[str, ...], first_below: int | None = None
                 ) -> Iterator[tuple[Path, np.ndarray, np.ndarray, dict[str, np.ndarray], float]]:
    """(path, rep indices, fresh, ``fields``, seconds) of each readable chunk file in ``d``, in name order.

    ``fresh`` marks the repetitions no earlier chunk held: a run resumed with another chunking
    leaves overlapping chunks, and each repetition must count once. Files whose first repetition
    is ``>= first_below`` are not opened; files that cannot be read (a damaged disk: a chunk cut
    short by a crash never gets its final name) are skipped.
    """
    seen = np.zeros(0, dtype=bool)
    for path in sorted(d.iterdir()):
        m = _CHUNK_FILE.match(path.name)
        if not m or (first_below is not None and int(m.group(1)) >= first_below):
            continue
        try:
            with np.load(path, allow_pickle=False) as data:
                r, arrays, secs = data["reps"].astype(np.int64), {f: data[f] for f in fields}, float(data["seconds"])
        except _UNREADABLE:
            continue
        if r.size and r.max() >= seen.size:
            seen = np.concatenate([seen, np.zeros(int(r.max()) + 1 - seen.size, dtype=bool)])
        fresh = ~seen[r]
        seen[r] = True
        yield path, r, fresh, arrays, secs


@dataclass
class JournalTask:
    """What a journal holds for one task (see :meth:`Journal.tasks`)."""

    key: str
    about: dict[str, Any]
    reps: int
    pulls: int
    seconds: float
    modified: float
    #: repetitions that stopped by themselves (the others reached the cap), and those of them
    #: whose recommendation is wrong: a long run's error rate can be followed before it ends
    stopped: int
    wrong: int


class Journal:
    """Finished chunks of simulate() calls under one directory, one sub-directory per task key."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _dir(self, task: Any) -> Path:
        return self.root / task_key(task)[:32]

    def load(self, task: Any, reps: int) -> tuple[dict[str, np.ndarray], np.ndarray, float]:
        """The journalled rows of repetitions ``< reps``: (arrays by field, their rep indices, seconds).

        ``seconds`` is the worker time those chunks took when they ran (pro rata when only some of
        a chunk's repetitions are asked for). Files that cannot be read
        (a chunk cut short by a crash before its rename never has a final name, but a damaged
        disk might) are skipped and their repetitions run again.
        """
        rows: dict[str, list[np.ndarray]] = {f: [] for f in JOURNAL_FIELDS}
        idx: list[np.ndarray] = []
        seconds = 0.0
        d = self._dir(task)
        if not d.is_dir():
            return {}, np.zeros(0, dtype=np.int64), 0.0
        for _, r, fresh, arrays, secs in _read_chunks(d, JOURNAL_FIELDS, first_below=reps):
            keep = fresh & (r < reps)
            if not keep.any():
                continue
            idx.append(r[keep])
            for f in JOURNAL_FIELDS:
                rows[f].append(arrays[f][keep])
            seconds += secs * float(keep.mean())
        if not idx:
            return {}, np.zeros(0, dtype=np.int64), 0.0
        return {f: np.concatenate(v) for f, v in rows.items()}, np.concatenate(idx), seconds

    def save(self, task: Any, out: dict[str, Any], seconds: float, about: dict[str, Any] | None = None) -> Path:
        """Write one finished chunk (``out`` as :func:`run_chunk` returns it) atomically.

        ``about`` (JSON-able: algorithm, instance, ...) is written once per task to
        ``task.json``, for :meth:`tasks`; it plays no part in loading.
        """
        d = self._dir(task)
        d.mkdir(parents=True, exist_ok=True)
        if about is not None and not (d / "task.json").exists():
            text = json.dumps(_canonical(about), indent=1).encode()
            _write_atomic(d / "task.json", lambda fh: fh.write(text))
        r = np.asarray(out["reps"], dtype=np.int64)
        path = d / f"reps-{int(r.min()):09d}-{int(r.max()):09d}.npz"
        # compressed: per-arm counts of 5,000 runs at n = 10,000 are 400 MB raw
        _write_atomic(path, lambda fh: np.savez_compressed(fh, reps=r, seconds=np.float64(seconds),
                                                           **{f: out[f] for f in JOURNAL_FIELDS}))
        return path

    def tasks(self) -> list[JournalTask]:
        """Every task in the journal with its finished repetitions, pulls, worker seconds, stopped and wrong runs.

        Oldest change first. ``about`` is the description written by :meth:`save` (empty for a
        task journalled before descriptions were kept); unreadable chunk files are skipped, as in
        :meth:`load`.
        """
        found = []
        if not self.root.is_dir():
            return found
        for d in self.root.iterdir():
            if not d.is_dir():
                continue
            try:
                about = json.loads((d / "task.json").read_text())
            except (OSError, ValueError):
                about = {}
            n, pulls, seconds, modified, stopped, wrong = 0, 0, 0.0, 0.0, 0, 0
            for path, _, fresh, arrays, secs in _read_chunks(d, ("pulls", "stopped", "correct")):
                n += int(fresh.sum())
                pulls += int(arrays["pulls"][fresh].sum())
                done = arrays["stopped"][fresh].astype(bool)
                stopped += int(done.sum())
                wrong += int((done & ~arrays["correct"][fresh].astype(bool)).sum())
                seconds += secs * float(fresh.mean())  # pro rata, as in load()
                modified = max(modified, path.stat().st_mtime)
            found.append(JournalTask(d.name, about, n, pulls, seconds, modified, stopped, wrong))
        return sorted(found, key=lambda t: t.modified)
