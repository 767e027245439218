"""Validating an organizer's experiment spec: items, labels, learners, context and policies.

Every check raises :class:`~purebandits.service.errors.BadRequest` with a message that names
the problem, before anything is stored. :func:`validate_spec` turns the JSON body of ``POST
/api/experiments`` into an :class:`ExperimentSpec` that the protocol stores as is.
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import math
import re
import secrets
from dataclasses import dataclass
from typing import Any

import numpy as np

from purebandits.base import Learner
from purebandits.registry import get_learner_class, make_learner
from purebandits.service.errors import BadRequest

__all__ = [
    "DEFAULT_LABELS", "DEFAULT_ALGORITHM", "DEFAULT_PARAMS", "DEFAULT_DELTA", "REPEAT_POLICIES", "MAX_ITEMS",
    "MAX_PARTICIPANT_ID",
    "ExperimentSpec", "LearnerSpec", "validate_spec", "parse_items_csv", "has_control", "check_text",
    "check_participant_id",
]

#: the caption contest's label set: name -> reward
DEFAULT_LABELS = [
    {"name": "unfunny", "reward": 0.0},
    {"name": "somewhat funny", "reward": 0.5},
    {"name": "funny", "reward": 1.0},
]
#: the learner of a new experiment when the spec names none: KL-RandLUCB, delta-correct and the
#: fewest answers to stop on the bundled contests (docs/default_learner.md, "Default learner" in
#: docs/service.md)
DEFAULT_ALGORITHM = "kl_rand_lucb"
DEFAULT_PARAMS: dict[str, Any] = {}
#: the error probability a learner that takes ``delta`` targets when the spec gives none
DEFAULT_DELTA = 0.05
#: "never": an item at most once per participant while unseen items remain; "not_consecutive":
#: never the same item twice in a row
REPEAT_POLICIES = ("never", "not_consecutive")
MAX_ITEMS = 100_000
MAX_EXPIRY_SECONDS = 366 * 86400
MAX_INSTRUCTIONS = 2000
MAX_IMAGE_BYTES = 2_000_000
IMAGE_TYPES = {"image/png": b"\x89PNG\r\n\x1a\n", "image/jpeg": b"\xff\xd8\xff", "image/gif": b"GIF8",
               "image/webp": b"RIFF"}
#: participant ids chosen by a client (a crowd platform's worker id) fit the 36-character column
MAX_PARTICIPANT_ID = 36
_LABEL_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,40}$")
_CONTROL = {chr(c) for c in range(32)} - {"\t", "\n", "\r"} | {"\x7f"}


@dataclass
class LearnerSpec:
    """One learner of an experiment: label, registry name, parameters, share of participants, seed."""

    label: str
    algorithm: str
    params: dict[str, Any]
    share: float
    seed: int

    def fresh(self, n_arms: int) -> Learner:
        """A started learner with this spec's parameters and seed."""
        return make_learner(self.algorithm, **self.params).start(n_arms, seed=self.seed)


@dataclass
class ExperimentSpec:
    """A validated experiment: what ``create_experiment`` stores."""

    name: str
    items: list[dict[str, Any]]
    labels: list[dict[str, Any]]
    learners: list[LearnerSpec]
    k: int
    query_expiry_seconds: float | None
    instructions: str | None
    image: tuple[str, bytes] | None
    repeats: str
    answers_per_participant: int | None


def has_control(text: str) -> bool:
    """NUL and other C0 control characters (PostgreSQL cannot store NUL; none belongs in a caption)."""
    return any(ch in _CONTROL for ch in text)


def check_text(text: str, where: str) -> None:
    """Refuse control characters and lone UTF-16 surrogates (neither can be stored as UTF-8)."""
    if has_control(text):
        raise BadRequest(f"{where}: control characters (such as NUL) are not allowed")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest(f"{where}: not valid Unicode text (a lone surrogate)") from None


def check_participant_id(pid: Any) -> str:
    """A client-chosen participant id: 1..36 printable characters, no surrounding spaces."""
    if not isinstance(pid, str) or not 1 <= len(pid) <= MAX_PARTICIPANT_ID or pid != pid.strip():
        raise BadRequest(f"participant_id must be 1..{MAX_PARTICIPANT_ID} characters without surrounding spaces")
    check_text(pid, "participant_id")
    if not pid.isprintable():
        raise BadRequest("participant_id must be printable text")
    return pid


def parse_items_csv(text: str) -> list[dict[str, Any]]:
    """Items from CSV text with a header: ``text`` (or ``caption``), optional ``id`` and ``image_url``."""
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    header = [h.strip() for h in (reader.fieldnames or [])]
    text_col = "text" if "text" in header else "caption" if "caption" in header else None
    if text_col is None:
        raise BadRequest(f"items_csv: the header needs a 'text' (or 'caption') column, got {header}")
    out = []
    for row in reader:
        row = {(k or "").strip(): v for k, v in row.items()}
        item: dict[str, Any] = {"text": row.get(text_col)}
        if row.get("id") not in (None, ""):
            item["id"] = row["id"]
        img = row.get("image_url") or row.get("image")
        if img:
            item["image_url"] = img
        out.append(item)
    return out


def _validate_items(raw: list[Any]) -> list[dict[str, Any]]:
    if not raw:
        raise BadRequest("item list is empty: an experiment needs at least 2 items")
    if len(raw) > MAX_ITEMS:
        raise BadRequest(f"too many items: {len(raw)} > {MAX_ITEMS}")
    seen: dict[str, int] = {}
    out = []
    for i, it in enumerate(raw):
        if isinstance(it, str):
            it = {"text": it}
        if not isinstance(it, dict):
            raise BadRequest(f"item {i}: must be an object with 'text' (and optional 'id', 'image_url')")
        text = it.get("text")
        if not isinstance(text, str) or not text.strip():
            raise BadRequest(f"item {i}: 'text' must be a non-empty string")
        check_text(text, f"item {i}: 'text'")
        ext = it.get("id")
        ext = str(i) if ext is None else str(ext).strip()
        if not ext or len(ext) > 200:
            raise BadRequest(f"item {i}: 'id' must be 1..200 characters")
        check_text(ext, f"item {i}: 'id'")
        if ext in seen:
            raise BadRequest(f"duplicate item id {ext!r} (items {seen[ext]} and {i})")
        seen[ext] = i
        img = it.get("image_url")
        if img is not None:
            if not isinstance(img, str) or not (img.startswith(("https://", "http://", "/"))):
                raise BadRequest(f"item {i}: 'image_url' must be an http(s) URL or an absolute path")
            check_text(img, f"item {i}: 'image_url'")
        out.append({"id": ext, "text": text.strip(), "image_url": img})
    if len(out) < 2:
        raise BadRequest(f"an experiment needs at least 2 items, got {len(out)}")
    return out


def _check_json_numbers(value: Any, where: str) -> None:
    """Integers must fit in 64 bits and floats be finite (the learners and the database need both)."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, str):
        check_text(value, where)
    elif isinstance(value, int):
        if not -(2**62) <= value <= 2**62:
            raise BadRequest(f"{where}: integer {value} out of range (|x| <= 2**62)")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise BadRequest(f"{where}: number must be finite")
    elif isinstance(value, dict):
        for k, v in value.items():
            check_text(str(k), where)
            _check_json_numbers(v, f"{where}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_json_numbers(v, f"{where}[{i}]")
    else:
        raise BadRequest(f"{where}: params must be JSON values")


def _validate_labels(raw: list[Any] | None) -> list[dict[str, Any]]:
    if raw is None:
        return [dict(lab) for lab in DEFAULT_LABELS]
    if not isinstance(raw, list) or len(raw) < 2:
        raise BadRequest("labels: give at least 2 labels, each {'name': ..., 'reward': ...}")
    out, seen = [], set()
    for i, lab in enumerate(raw):
        if not isinstance(lab, dict) or not isinstance(lab.get("name"), str) or not lab["name"].strip():
            raise BadRequest(f"label {i}: needs a non-empty 'name'")
        name = lab["name"].strip()
        check_text(name, f"label {i}")
        if len(name) > 100:
            raise BadRequest(f"label {name[:20]!r}...: name longer than 100 characters")
        if lab.get("reward") is None:
            raise BadRequest(f"label {name!r} has no reward")
        r = lab["reward"]
        if isinstance(r, bool) or not isinstance(r, int | float) or not math.isfinite(r):
            raise BadRequest(f"label {name!r}: reward must be a finite number, got {r!r}")
        if name in seen:
            raise BadRequest(f"duplicate label {name!r}")
        seen.add(name)
        out.append({"name": name, "reward": float(r)})
    return out


def _validate_image(raw: Any) -> tuple[str, bytes] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) != {"content_type", "data"}:
        raise BadRequest("image: give {'content_type': 'image/png' (or jpeg, gif, webp), 'data': <base64>}")
    ctype = raw["content_type"]
    if ctype not in IMAGE_TYPES:
        raise BadRequest(f"image: content_type must be one of {sorted(IMAGE_TYPES)}, got {ctype!r}")
    if not isinstance(raw["data"], str) or len(raw["data"]) > MAX_IMAGE_BYTES * 4 // 3 + 8:
        raise BadRequest(f"image: data must be base64 text of at most {MAX_IMAGE_BYTES} bytes")
    try:
        data = base64.b64decode(raw["data"], validate=True)
    except (binascii.Error, ValueError):
        raise BadRequest("image: data is not valid base64") from None
    if not data or len(data) > MAX_IMAGE_BYTES:
        raise BadRequest(f"image: must be 1..{MAX_IMAGE_BYTES} bytes, got {len(data)}")
    if not data.startswith(IMAGE_TYPES[ctype]):
        raise BadRequest(f"image: the data is not a {ctype} file")
    return ctype, data


def _validate_learner(i: int, entry: dict[str, Any], shortcuts: dict[str, Any], seed: int,
                      labels: list[dict[str, Any]]) -> tuple[LearnerSpec, Learner]:
    where = f"algorithms[{i}]"
    algorithm = entry.get("algorithm") or DEFAULT_ALGORITHM
    if not isinstance(algorithm, str):
        raise BadRequest(f"{where}: 'algorithm' must be a registry name (see `purebandits algorithms`)")
    try:
        cls = get_learner_class(algorithm)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    params = entry.get("params")
    params = dict(DEFAULT_PARAMS if algorithm == DEFAULT_ALGORITHM and params is None else params or {})
    if not isinstance(params, dict):
        raise BadRequest(f"{where}: 'params' must be an object")
    accepted = cls._param_names()
    shortcuts = dict(shortcuts)
    if "delta" in accepted and "delta" not in params and "delta" not in shortcuts:
        shortcuts["delta"] = DEFAULT_DELTA
    target = shortcuts.get("delta")
    if isinstance(target, int | float) and not isinstance(target, bool):
        if not 0 < target < 1:
            raise BadRequest(f"delta must be in (0, 1): it is the target error probability, got {target!r}")
        # the shortcut is the error probability; learners proven to err at most 2 delta get delta / 2
        shortcuts["delta"] = shortcuts["delta"] / cls.error_per_delta
    for key, value in shortcuts.items():
        if key not in accepted:
            continue  # e.g. budget for a fixed-confidence learner, delta for uniform sampling
        if key in params and params[key] != value:
            raise BadRequest(f"parameter {key!r} given twice with different values")
        params[key] = value
    _check_json_numbers(params, f"{where}.params")
    label = entry.get("label") or cls.__name__
    if not isinstance(label, str) or not _LABEL_RE.match(label):
        raise BadRequest(f"{where}: label must be 1..40 letters, digits, '_', '.' or '-', got {label!r}")
    share = entry.get("share", 1.0)
    if isinstance(share, bool) or not isinstance(share, int | float) or not math.isfinite(share) or share <= 0:
        raise BadRequest(f"{where}: share must be a positive number, got {share!r}")
    lseed = entry.get("seed")
    lseed = (seed + i) % 2**63 if lseed is None else lseed
    if isinstance(lseed, bool) or not isinstance(lseed, int) or not 0 <= lseed < 2**63:
        raise BadRequest(f"{where}: seed must be an integer in [0, 2**63), got {lseed!r}")
    try:
        learner = make_learner(algorithm, **params)
    except (ValueError, TypeError) as exc:
        raise BadRequest(str(exc)) from None
    if cls.tags.get("bounded_rewards") and any(not 0.0 <= lab["reward"] <= 1.0 for lab in labels):
        raise BadRequest(f"{algorithm} needs rewards in [0, 1]; label rewards are {[lab['reward'] for lab in labels]}")
    return LearnerSpec(label=label, algorithm=algorithm, params=params, share=float(share), seed=int(lseed)), learner


def validate_spec(spec: dict[str, Any]) -> ExperimentSpec:
    """Check the body of ``POST /api/experiments`` and return what to store; BadRequest names the problem.

    Keys: ``name``, ``items`` (list of {id, text, image_url} or strings) or ``items_csv`` (CSV
    text), ``labels`` (list of {name, reward}; default the caption contest's), one learner as
    ``algorithm`` + ``params`` or several as ``algorithms`` (list of {label, algorithm, params,
    share, seed}), the shortcuts ``k``, ``delta``, ``budget`` (merged into every learner that
    takes them; ``delta`` is the target error probability, default :data:`DEFAULT_DELTA`, and
    a learner proven to err at most ``error_per_delta * delta`` gets it divided by that),
    ``seed``, ``query_expiry_seconds``, ``instructions``, ``image`` ({content_type, data
    (base64)}), ``repeats`` (``never`` or ``not_consecutive``), ``answers_per_participant``.
    """
    name = spec.get("name") or "experiment"
    if not isinstance(name, str) or len(name) > 200:
        raise BadRequest("name must be a string of at most 200 characters")
    check_text(name, "name")
    if spec.get("items") is not None and spec.get("items_csv") is not None:
        raise BadRequest("give either 'items' or 'items_csv', not both")
    if spec.get("items_csv") is not None:
        if not isinstance(spec["items_csv"], str):
            raise BadRequest("items_csv must be CSV text")
        check_text(spec["items_csv"], "items_csv")
        raw_items = parse_items_csv(spec["items_csv"])
    else:
        raw_items = spec.get("items")
    if raw_items is None:
        raise BadRequest("item list is empty: give 'items' (a JSON list) or 'items_csv' (CSV text)")
    if not isinstance(raw_items, list):
        raise BadRequest("items must be a list")
    items = _validate_items(raw_items)
    labels = _validate_labels(spec.get("labels"))
    seed = spec.get("seed")
    if seed is None:
        seed = secrets.randbits(32)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0 or seed >= 2**63:
        raise BadRequest(f"seed must be an integer in [0, 2**63), got {seed!r}")
    # the learners see the items in an order drawn from the seed, not the catalogue's: a learner's
    # first sweep (lil'UCB and the LUCB family break ties by the lowest index) would otherwise show
    # every early participant the first items of the file, in file order
    order = np.random.default_rng([seed, 1]).permutation(len(items))
    items = [items[i] for i in order]
    shortcuts = {key: spec[key] for key in ("k", "delta", "budget") if spec.get(key) is not None}
    entries = spec.get("algorithms")
    if entries is not None:
        if spec.get("algorithm") is not None or spec.get("params"):
            raise BadRequest("give either 'algorithm' and 'params' (one learner) or 'algorithms' (several), not both")
        if not isinstance(entries, list) or not entries or len(entries) > 10:
            raise BadRequest("algorithms must be a list of 1..10 learners {label, algorithm, params, share}")
        if not all(isinstance(e, dict) for e in entries):
            raise BadRequest("algorithms: each entry must be an object {label, algorithm, params, share}")
    else:
        entries = [{"algorithm": spec.get("algorithm"), "params": spec.get("params")}]
    learners, started = [], []
    for i, entry in enumerate(entries):
        ls, learner = _validate_learner(i, entry, shortcuts, seed, labels)
        learners.append(ls)
        started.append(learner)
    if len({ls.label for ls in learners}) != len(learners):
        raise BadRequest(f"algorithms: labels must be unique, got {[ls.label for ls in learners]}")
    total = sum(ls.share for ls in learners)
    for ls in learners:
        ls.share = ls.share / total
    for ls, learner in zip(learners, started, strict=True):
        try:
            learner.start(len(items), seed=ls.seed)
            learner.recommend()
        except (ValueError, TypeError, OverflowError) as exc:
            raise BadRequest(f"bad parameter for {ls.algorithm}: {exc}") from None
        except Exception:  # e.g. a compiled kernel refusing a value: still the client's input
            raise BadRequest(f"bad parameter for {ls.algorithm}: the learner cannot start with {ls.params}") from None
    ks = {learner.k_ for learner in started}
    if len(ks) != 1:
        raise BadRequest(f"algorithms: every learner must find the same number of items k, got {sorted(ks)}")
    expiry = spec.get("query_expiry_seconds")
    if expiry is not None and (isinstance(expiry, bool) or not isinstance(expiry, int | float)
                               or not 0 < expiry <= MAX_EXPIRY_SECONDS):
        raise BadRequest(f"query_expiry_seconds must be a number in (0, {MAX_EXPIRY_SECONDS}] "
                         f"(one year), got {expiry!r}")
    instructions = spec.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str) or len(instructions) > MAX_INSTRUCTIONS:
            raise BadRequest(f"instructions must be text of at most {MAX_INSTRUCTIONS} characters")
        check_text(instructions, "instructions")
        instructions = instructions.strip() or None
    repeats = spec.get("repeats") or "never"
    if repeats not in REPEAT_POLICIES:
        raise BadRequest(f"repeats must be one of {list(REPEAT_POLICIES)}, got {repeats!r}")
    per = spec.get("answers_per_participant")
    if per is not None and (isinstance(per, bool) or not isinstance(per, int) or not 1 <= per <= 1_000_000):
        raise BadRequest(f"answers_per_participant must be an integer in [1, 1000000], got {per!r}")
    return ExperimentSpec(name=name, items=items, labels=labels, learners=learners, k=ks.pop(),
                          query_expiry_seconds=None if expiry is None else float(expiry),
                          instructions=instructions, image=_validate_image(spec.get("image")), repeats=repeats,
                          answers_per_participant=per)
