"""Real crowd data as bandit instances: caption-contest vote summaries and RTE crowd workers.

The package ships the files it uses (``purebandits/data/``, with provenance and licence notes)
and loads them without network access. Loaders are strict: a malformed file is rejected with a
``DataFormatError`` naming the file, the line and the problem.
"""

from __future__ import annotations

import csv
from collections import OrderedDict
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

import numpy as np

from purebandits.exceptions import PureBanditsError
from purebandits.instances.rewards import Bernoulli, Categorical

__all__ = [
    "DataFormatError",
    "CaptionContest",
    "load_caption_summary",
    "load_means",
    "caption_contest",
    "CAPTION_CONTESTS",
    "CAPTION_REWARD_MODELS",
    "CrowdWorkers",
    "load_rte_workers",
    "derive_rte_workers",
]

#: bundled contests: id -> file in purebandits/data/caption_contest/
CAPTION_CONTESTS = {
    "512": "512_summary_LilUCB.csv",
    "558": "558_summary_LilUCB.csv",
    "559": "559_summary_RandomSamping.csv",
}
#: caption-contest labels, in reward order, with their rewards
CAPTION_LABELS = ("unfunny", "somewhat_funny", "funny")
CAPTION_REWARDS = (0.0, 0.5, 1.0)
#: how a vote maps to a reward: "graded" {unfunny 0, somewhat 1/2, funny 1}; "binary" {unfunny 0, somewhat or
#: funny 1}, the mapping that gives TNM17 Sec. 5's best-caption means exactly (558: 469/875 = 0.536, 512: 8/10)
CAPTION_REWARD_MODELS = ("graded", "binary")

#: the columns a caption-contest summary must have (found by header name, in any order; the public files also
#: have rank, count, score, precision and contest, and any other column is ignored)
_SUMMARY_COLUMNS = ("funny", "somewhat_funny", "unfunny", "caption")


class DataFormatError(PureBanditsError, ValueError):
    """A data file does not have the expected format (the message names file and line)."""


def _data_path(*parts: str) -> Path:
    return Path(str(resources.files("purebandits").joinpath("data", *parts)))


@dataclass(frozen=True)
class CaptionContest:
    """One contest's captions, their vote counts (unfunny, somewhat funny, funny) and the vote-to-reward map.

    ``reward="graded"`` (default) rewards a vote 0, 1/2 or 1; ``reward="binary"`` rewards "somewhat funny" or
    "funny" 1 and "unfunny" 0 (TNM17 Sec. 5's means; see :data:`CAPTION_REWARD_MODELS`).
    """

    contest: str
    captions: list[str]
    votes: np.ndarray  # (n, 3) int64, columns in CAPTION_LABELS order
    source: str
    reward: str = "graded"

    def __post_init__(self) -> None:
        if self.reward not in CAPTION_REWARD_MODELS:
            raise ValueError(f"reward must be one of {CAPTION_REWARD_MODELS}, got {self.reward!r}")

    @property
    def n_arms(self) -> int:
        return len(self.captions)

    @property
    def means(self) -> np.ndarray:
        """Mean reward of each caption: (score - 1) / 2 on {0, 1/2, 1} ("graded"), or the share of
        somewhat-funny-or-funny votes ("binary", computed as an exact integer ratio)."""
        if self.reward == "binary":
            return (self.votes[:, 1] + self.votes[:, 2]) / self.votes.sum(axis=1)
        return (self.votes @ np.asarray(CAPTION_REWARDS)) / self.votes.sum(axis=1)

    def model(self) -> Bernoulli | Categorical:
        """Arms bootstrapped from each caption's votes: draw a vote with the caption's vote frequencies and map it
        to its reward, i.e. categorical on {0, 1/2, 1} ("graded") or Bernoulli with p = (funny + somewhat)/votes
        ("binary")."""
        if self.reward == "binary":
            return Bernoulli(self.means)
        return Categorical(self.votes, CAPTION_REWARDS)


def _int_field(row: dict, name: str, path: str, line: int) -> int:
    raw = row.get(name)
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise DataFormatError(f"{path}, line {line}: column {name!r} must be an integer, got {raw!r}") from None
    if value < 0:
        raise DataFormatError(f"{path}, line {line}: column {name!r} must be >= 0, got {value}")
    return value


def load_caption_summary(path: str | Path) -> CaptionContest:
    """Read a caption-contest summary CSV: the public nextml format, or any CSV with its columns.

    Columns are found by header name, in any order; ``funny``, ``somewhat_funny``, ``unfunny`` and
    ``caption`` are required, other columns are ignored (so the service's ``summary.csv`` export reads
    too). Checks integer non-negative vote counts, ``count == funny + somewhat_funny + unfunny`` where
    a ``count`` column is present, at least one vote per caption, and at least one caption. A UTF-8
    byte-order mark (spreadsheet exports) is skipped; ``contest`` defaults to the file's name.
    """
    path = Path(path)
    name = str(path)
    captions: list[str] = []
    votes: list[tuple[int, int, int]] = []
    contest = ""
    try:
        fh = open(path, newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise DataFormatError(f"{name}: cannot read: {exc.strerror}") from None
    with fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        missing = [c for c in _SUMMARY_COLUMNS if c not in header]
        if missing:
            raise DataFormatError(f"{name}, line 1: missing column(s) {missing}; header is {header}")
        try:
            for row in reader:
                line = reader.line_num
                if None in row or any(v is None for v in row.values()):
                    raise DataFormatError(f"{name}, line {line}: wrong number of fields")
                f, s, u = (_int_field(row, c, name, line) for c in ("funny", "somewhat_funny", "unfunny"))
                count = _int_field(row, "count", name, line) if "count" in header else f + s + u
                if count != f + s + u:
                    raise DataFormatError(
                        f"{name}, line {line}: count {count} != funny + somewhat_funny + unfunny = {f + s + u}")
                if count == 0:
                    raise DataFormatError(f"{name}, line {line}: caption has no votes")
                captions.append(row["caption"].strip())
                votes.append((u, s, f))
                contest = contest or (row.get("contest") or "").strip()
        except csv.Error as exc:
            raise DataFormatError(f"{name}, line {reader.line_num}: {exc}") from None
        except UnicodeDecodeError as exc:
            raise DataFormatError(f"{name}: not UTF-8 text ({exc.reason})") from None
    if not captions:
        raise DataFormatError(f"{name}: no captions")
    contest = contest or path.stem
    return CaptionContest(contest=contest, captions=captions, votes=np.array(votes, dtype=np.int64), source=name)


def caption_contest(contest: int | str, reward: str = "graded") -> CaptionContest:
    """A bundled contest by id: "512", "558" (lil-KLUCB paper) or "559" (uniform-random votes), with the
    vote-to-reward map ``reward`` ("graded" or "binary", see :class:`CaptionContest`)."""
    key = str(contest)
    if key not in CAPTION_CONTESTS:
        raise ValueError(f"unknown caption contest {contest!r}; bundled: {sorted(CAPTION_CONTESTS)}")
    return replace(load_caption_summary(_data_path("caption_contest", CAPTION_CONTESTS[key])), reward=reward)


@dataclass(frozen=True)
class CrowdWorkers:
    """Crowd workers with their label counts and correct counts against gold."""

    worker_ids: list[str]
    labels: np.ndarray
    correct: np.ndarray
    source: str

    @property
    def n_arms(self) -> int:
        return len(self.worker_ids)

    @property
    def accuracies(self) -> np.ndarray:
        return self.correct / self.labels

    def model(self) -> Bernoulli:
        """Bernoulli arms with each worker's accuracy as the mean."""
        return Bernoulli(self.accuracies)


def load_rte_workers(path: str | Path | None = None) -> CrowdWorkers:
    """The 164 RTE workers (Snow et al. 2008) as a :class:`CrowdWorkers` table.

    Reads the bundled derived table ``data/rte/rte_workers.csv`` (``worker_id, labels, correct``)
    unless ``path`` is given.
    """
    path = Path(path) if path is not None else _data_path("rte", "rte_workers.csv")
    name = str(path)
    ids: list[str] = []
    labels: list[int] = []
    correct: list[int] = []
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        if reader.fieldnames != ["worker_id", "labels", "correct"]:
            raise DataFormatError(f"{name}, line 1: header must be worker_id,labels,correct, got {reader.fieldnames}")
        for row in reader:
            line = reader.line_num
            n = _int_field(row, "labels", name, line)
            c = _int_field(row, "correct", name, line)
            if n == 0 or c > n:
                raise DataFormatError(f"{name}, line {line}: need 0 <= correct <= labels and labels > 0")
            if not row["worker_id"]:
                raise DataFormatError(f"{name}, line {line}: empty worker_id")
            ids.append(row["worker_id"])
            labels.append(n)
            correct.append(c)
    if not ids:
        raise DataFormatError(f"{name}: no workers")
    return CrowdWorkers(ids, np.array(labels), np.array(correct), name)


def derive_rte_workers(raw_tsv: str | Path) -> CrowdWorkers:
    """Per-worker accuracy from the raw ``rte.standardized.tsv`` (tab-separated, with gold)."""
    name = str(raw_tsv)
    agg: OrderedDict[str, list[int]] = OrderedDict()
    with open(raw_tsv, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh, delimiter="\t")
        need = ["!amt_worker_ids", "response", "gold"]
        if not reader.fieldnames or any(c not in reader.fieldnames for c in need):
            raise DataFormatError(f"{name}, line 1: need columns {need}, got {reader.fieldnames}")
        for row in reader:
            line = reader.line_num
            if row["response"] not in ("0", "1") or row["gold"] not in ("0", "1"):
                raise DataFormatError(f"{name}, line {line}: response and gold must be 0 or 1")
            a = agg.setdefault(row["!amt_worker_ids"], [0, 0])
            a[0] += 1
            a[1] += int(row["response"] == row["gold"])
    ids = sorted(agg)
    return CrowdWorkers(ids, np.array([agg[w][0] for w in ids]), np.array([agg[w][1] for w in ids]), name)


def load_means(path: str | Path) -> np.ndarray:
    """Arm means from a CSV with a header: the column ``mean`` (or ``means``; any case), other columns ignored.

    Every value must be a finite number; at least two rows. Errors name the file and line.
    """
    path = Path(path)
    name = str(path)
    try:
        fh = open(path, newline="", encoding="utf-8-sig")
    except OSError as exc:
        raise DataFormatError(f"{name}: cannot read: {exc.strerror}") from None
    out: list[float] = []
    with fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        col = next((h for h in header if h is not None and h.strip().lower() in ("mean", "means")), None)
        if col is None:
            raise DataFormatError(f"{name}, line 1: no 'mean' column; header is {header}")
        try:
            for row in reader:
                raw = row.get(col)
                try:
                    value = float(raw)  # type: ignore[arg-type]
                except (TypeError, ValueError):
                    raise DataFormatError(
                        f"{name}, line {reader.line_num}: mean must be a number, got {raw!r}") from None
                if not np.isfinite(value):
                    raise DataFormatError(f"{name}, line {reader.line_num}: mean must be finite, got {raw!r}")
                out.append(value)
        except csv.Error as exc:
            raise DataFormatError(f"{name}, line {reader.line_num}: {exc}") from None
        except UnicodeDecodeError as exc:
            raise DataFormatError(f"{name}: not UTF-8 text ({exc.reason})") from None
    if len(out) < 2:
        raise DataFormatError(f"{name}: {len(out)} mean(s); at least 2 arms are needed")
    return np.asarray(out, dtype=np.float64)
