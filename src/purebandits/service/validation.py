"""Validating an organizer's experiment spec: items, labels, learners, context and policies.

Every check raises :class:`~purebandits.service.errors.BadRequest` with a message that names
the problem, before anything is stored. :func:`validate_spec` turns the JSON body of ``POST
/api/experiments`` into an :class:`ExperimentSpec` that the protocol stores as is.

Input limits (each refused with a 422 whose ``detail`` is one line of at most
:data:`MAX_DETAIL` characters, so a hostile value is never echoed back whole):

* texts: experiment name <= 200 characters, item text <= :data:`MAX_ITEM_TEXT` (2,000: a
  caption contest's captions are at most a few hundred), item id <= 200, label name <= 100,
  at most :data:`MAX_LABELS` labels, instructions <= 2,000, ``image_url`` <= 2,000; no lone
  UTF-16 surrogates and no control characters other than tab and newlines in any of them;
* ``image_url``: an absolute ``http://`` or ``https://`` URL with a host and no credentials, or
  a root-relative path starting with a single ``/``; never protocol-relative (``//host/x``),
  ``javascript:``, ``data:`` or another scheme, never a backslash (browsers read ``/\\host``
  as ``//host``), a control or other non-printable character;
* numbers: label rewards finite with ``|reward| <= 1e6`` (an unbounded learner sums them:
  1e308 would overflow its sums to inf), shares in ``(0, 1e6]``, integers in learner
  parameters and the ``k`` / ``delta`` / ``budget`` shortcuts within ``|x| <= 2**62`` and floats
  finite (checked even for a learner that ignores the shortcut), parameters nested at most
  :data:`MAX_PARAM_DEPTH` deep, and ``N`` (a lil-KL learner sums ``N`` terms when it starts)
  at most :data:`MAX_PARAM_N`.
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import math
import re
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from purebandits.base import Learner
from purebandits.registry import get_learner_class, make_learner
from purebandits.service.crowd_settings import CrowdSettings, parse_crowd_settings
from purebandits.service.errors import BadRequest

__all__ = [
    "DEFAULT_LABELS", "DEFAULT_ALGORITHM", "DEFAULT_PARAMS", "FALLBACK_PARAMS",
    "default_params", "DEFAULT_DELTA", "REPEAT_POLICIES", "MAX_ITEMS",
    "MAX_PARTICIPANT_ID", "MAX_ITEM_TEXT", "MAX_LABELS", "MAX_ABS_REWARD", "MAX_SHARE", "MAX_URL",
    "ExperimentSpec", "LearnerSpec", "validate_spec", "parse_items_csv", "has_control", "check_text",
    "check_participant_id", "check_image_url", "check_webhook_url", "one_line", "read_items_csv", "ItemsFile",
    "decode_items_csv", "item_intake", "QUERY_KINDS", "PAIRWISE_LABELS", "PAIR_CHOICES", "MAX_PAIRWISE_ITEMS",
    "STAGED", "stage2_learner",
]

#: the caption contest's label set: name -> reward
DEFAULT_LABELS = [
    {"name": "unfunny", "reward": 0.0},
    {"name": "somewhat funny", "reward": 0.5},
    {"name": "funny", "reward": 1.0},
]
#: what an experiment's queries ask: one item rated with a label, or two items, "which is better?"
QUERY_KINDS = ("rating", "pairwise", "rating_then_pairwise")
#: a staged experiment: ratings over every item until its learner has found the top ``top_m`` (or at
#: ``ratings_budget``), then comparisons among those (:mod:`purebandits.service.stages`)
STAGED = "rating_then_pairwise"
#: a pairwise experiment's labels as its learners see them (the Borda reduction, purebandits.pairwise): its item
#: won (reward 1) or lost (reward 0) against the opponent drawn for it; stored as the experiment's labels, so
#: counts, summaries and certificates read a pairwise experiment as the Bernoulli experiment it is
PAIRWISE_LABELS = [
    {"name": "won", "reward": 1.0},
    {"name": "lost", "reward": 0.0},
]
#: a pairwise query's answers: the item shown on the left or on the right is the better one (plus ``skip`` where
#: the experiment allows it)
PAIR_CHOICES = ("left", "right")
#: a pairwise experiment's items at most: its win matrix (the Bradley-Terry fit, the wins export) is n x n
MAX_PAIRWISE_ITEMS = 2000
#: the learner of a new experiment when the spec names none: KL-RandLUCB, delta-correct and the fewest answers to
#: stop on the bundled contests at their full size (docs/default_learner.md)
DEFAULT_ALGORITHM = "kl_rand_lucb"
#: K_inf bounds of each item's ratings at the Krichevsky-Trofimov level (purebandits.kinf_bounds), for the default
#: labels' rewards {0, 1/2, 1}: the fewest answers of every proven learner on the bundled contests, at full size and
#: on their top 50 (docs/default_learner.md); pinned, so that the stored parameters say what the learner ran with
#: (experiments created before keep their stored form). Labels with other rewards: :func:`default_params`.
DEFAULT_PARAMS: dict[str, Any] = {"form": "kinf"}
#: the default learner's bounds when the labels' rewards are not 2 or 3 values in [0, 1] (K_inf needs the support):
#: the Bernoulli KL at the same level, proven for any rewards in [0, 1]
FALLBACK_PARAMS: dict[str, Any] = {"form": "kt"}
#: the error probability a learner that takes ``delta`` targets when the spec gives none
DEFAULT_DELTA = 0.05
#: "never": an item at most once per participant while unseen items remain; "not_consecutive":
#: never the same item twice in a row
REPEAT_POLICIES = ("never", "not_consecutive")
MAX_ITEMS = 100_000
MAX_EXPIRY_SECONDS = 366 * 86400
MAX_INSTRUCTIONS = 2000
#: an item's text (a caption): the longest New Yorker contest caption is a few hundred characters
MAX_ITEM_TEXT = 2000
MAX_ITEM_ID = 200
MAX_NAME = 200
MAX_LABEL_NAME = 100
#: labels are the buttons of the rating page
MAX_LABELS = 50
#: |reward| of a label: an unbounded learner keeps sums (and sums of squares) of rewards
MAX_ABS_REWARD = 1e6
#: a learner's share of participants is relative (normalised); bounded so that the sum is finite
MAX_SHARE = 1e6
#: an item's image_url
MAX_URL = 2000
#: integers in learner parameters and shortcuts (the database and the compiled kernels need 64 bits)
MAX_PARAM_INT = 2**62
#: nesting of learner parameters (lists / objects in lists / objects)
MAX_PARAM_DEPTH = 8
#: the lil-KL learners' ``N`` (a power of two; the paper uses 8): starting sums ``N`` terms
MAX_PARAM_N = 2**16
#: an error message is cut to this many characters (one line)
MAX_DETAIL = 300
MAX_IMAGE_BYTES = 2_000_000
IMAGE_TYPES = {"image/png": b"\x89PNG\r\n\x1a\n", "image/jpeg": b"\xff\xd8\xff", "image/gif": b"GIF8",
               "image/webp": b"RIFF"}
#: participant ids chosen by a client (a crowd platform's worker id) fit the 36-character column
MAX_PARTICIPANT_ID = 36
_LABEL_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,40}$")
_CONTROL = {chr(c) for c in range(32)} - {"\t", "\n", "\r"} | {"\x7f"}
_CONTROL_RE = re.compile("[" + re.escape("".join(sorted(_CONTROL))) + "]")
_FORMULA_START = frozenset("=+-@")


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
    #: skip button, completion URL, gold items (:mod:`purebandits.service.crowd_settings`)
    crowd: CrowdSettings = field(default_factory=CrowdSettings)
    #: the file lines of the items file's rows left out for a blank text (``skip_blank``)
    skipped_blank_lines: list[int] = field(default_factory=list)
    #: what its queries ask (:data:`QUERY_KINDS`)
    query: str = "rating"
    #: a staged experiment's stage settings (:func:`_validate_stages`), else None
    stages: dict[str, Any] | None = None


def stage2_learner(stages: dict[str, Any]) -> LearnerSpec:
    """The learner of a staged experiment's stage 2, as its stage settings store it."""
    s2 = stages["stage2"]
    return LearnerSpec(label=s2["label"], algorithm=s2["algorithm"], params=dict(s2["params"]), share=1.0,
                       seed=int(s2["seed"]))


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
    """A client-chosen participant id: 1..36 printable characters, no surrounding spaces, not starting with
    ``=``, ``+``, ``-`` or ``@`` (a spreadsheet opening the CSV exports would run it as a formula)."""
    if not isinstance(pid, str) or not 1 <= len(pid) <= MAX_PARTICIPANT_ID or pid != pid.strip():
        raise BadRequest(f"participant_id must be 1..{MAX_PARTICIPANT_ID} characters without surrounding spaces")
    check_text(pid, "participant_id")
    if not pid.isprintable():
        raise BadRequest("participant_id must be printable text")
    if pid[0] in _FORMULA_START:
        raise BadRequest("participant_id must not start with '=', '+', '-' or '@' (spreadsheet formula)")
    return pid


def check_image_url(url: Any, where: str) -> str:
    """An item's image: an absolute http(s) URL with a host, or a root-relative path (``/img/1.png``).

    Refused: protocol-relative ``//host/x`` (another site), every other scheme (``javascript:``,
    ``data:``, ``file:``, ...), backslashes (browsers read ``/\\host`` as ``//host``), credentials
    (``user:pw@host``), control and other non-printable characters, lone surrogates, and more than
    :data:`MAX_URL` characters.
    """
    if not isinstance(url, str) or not url:
        raise BadRequest(f"{where} must be an http(s) URL or a path starting with '/'")
    if len(url) > MAX_URL:
        raise BadRequest(f"{where} is {len(url)} characters long; at most {MAX_URL} are allowed")
    check_text(url, where)
    if not url.isprintable() or "\\" in url:
        raise BadRequest(f"{where} must not contain backslashes, control or other non-printable characters")
    if url.startswith("/"):
        if url.startswith("//"):
            raise BadRequest(f"{where}: a protocol-relative URL ('//host/...') is not allowed; "
                             "give https://host/... or a path starting with a single '/'")
        return url
    try:
        parts = urlsplit(url)
        host, user = parts.hostname, parts.username
    except ValueError:
        raise BadRequest(f"{where} is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not url[:8].lower().startswith(("http://", "https://")):
        raise BadRequest(f"{where} must be an http(s) URL or a path starting with '/' (no javascript:, data: "
                         "or other schemes)")
    if not host:
        raise BadRequest(f"{where}: the URL has no host")
    if user is not None:
        raise BadRequest(f"{where}: credentials (user:password@) are not allowed in the URL")
    return url


def check_webhook_url(url: Any, allow_internal: bool = False) -> str:
    """The owner's webhook: an absolute http(s) URL with a host and no credentials (the checks of
    :func:`check_image_url`, without root-relative paths).

    Unless ``allow_internal`` (the operator's ``webhook_allow_internal``), its host must also be or resolve
    to a public address: a literal internal address (``127.0.0.1``, ``[::1]``, ``10.0.0.1``,
    ``169.254.169.254``, ``127.1``, ...) or a name that resolves only to such addresses is refused
    (:func:`purebandits.service.webhooks.public_addresses`). A name that does not resolve now is let
    through: each call resolves and checks it again.
    """
    from purebandits.service.webhooks import NotPublic, public_addresses

    if not isinstance(url, str) or not url[:8].lower().startswith(("http://", "https://")):
        raise BadRequest("webhook_url must be an absolute http(s) URL (https://host/path)")
    url = check_image_url(url, "webhook_url")
    try:
        port = urlsplit(url).port
    except ValueError:
        raise BadRequest("webhook_url: the port must be a number from 0 to 65535") from None
    if port == 0:
        raise BadRequest("webhook_url: port 0 cannot be called")
    if not allow_internal:
        try:
            public_addresses(url)
        except NotPublic as exc:
            raise BadRequest(f"webhook_url: {exc} (loopback, private, link-local and other internal "
                             "addresses are refused: the server makes the call)") from None
        except UnicodeError:
            raise BadRequest("webhook_url: the host name is not valid") from None
        except OSError:
            pass  # not resolvable now: checked again at every call
    return url


#: the column that gives an item's text, by preference (header names are matched without case)
TEXT_COLUMNS = ("text", "caption")
#: the column that gives an item's id, by preference: ours, the service's summary export's, the published
#: caption-contest summaries'
ID_COLUMNS = ("id", "item_id", "target_id")
IMAGE_COLUMNS = ("image_url", "image")
#: the line numbers of blank items left out that a response lists (the count is always whole)
MAX_SKIPPED_LINES = 100


@dataclass
class ItemsFile:
    """Items read from a CSV file: each a dict with ``text``, ``line`` (the file line its row starts on) and
    ``id`` / ``image_url`` when given; ``skipped_lines``: the lines of rows left out because their text was
    blank (``skip_blank``)."""

    items: list[dict[str, Any]]
    skipped_lines: list[int]


def decode_items_csv(data: bytes, where: str = "the items file") -> str:
    """The text of an items file's bytes: UTF-8, a leading byte-order mark dropped; anything else is refused
    with the line, column and byte where it stops being UTF-8 (decoding it as something else would put
    U+FFFD or wrong letters into the captions without a word)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise BadRequest(f"{where} is not UTF-8 text: line {line}, column {column} has the byte "
                         f"0x{data[exc.start]:02x}; save it as UTF-8 (in a spreadsheet: 'CSV UTF-8')") from None


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _column(names: list[str], wanted: tuple[str, ...]) -> int | None:
    for name in wanted:
        if name in names:
            return names.index(name)
    return None


def _row_of_its_own(line: str, n_fields: int) -> bool:
    """Whether ``line``, read alone, is a row of ``n_fields`` fields (of a file with at least 3 columns)."""
    if n_fields < 3:
        return False  # two columns: a line of a caption with one comma would look like a row
    try:
        fields = next(csv.reader([line]), [])
    except csv.Error:
        return False
    return len(fields) == n_fields


def read_items_csv(text: str, skip_blank: bool = False, where: str = "items_csv") -> ItemsFile:
    """Items from CSV text with a header: ``text`` or ``caption``; an id from ``id``, ``item_id`` or ``target_id``
    (a published caption-contest summary, or the service's own summary export, is an items file as it is);
    ``image_url`` (or ``image``); other columns are ignored.

    Every refusal names the file's line (``items_csv: line 12: ...``). A row whose text is blank is refused,
    or left out and its line listed when ``skip_blank``. The CSV is read strictly, so that a stray quote
    (a caption that opens a quote and never closes it) cannot silently join rows into one caption: a
    quote closed by the opening quote of a later field, or never closed, is refused, and so is a quoted
    field that runs over several lines of which one is a whole row of its own (a file of at least three
    columns, such as a published summary, whose captions may hold line breaks of their own). A row with
    more fields than the header (a comma in an unquoted caption) is refused too.
    """
    text = text[1:] if text.startswith("\ufeff") else text
    bad = _CONTROL_RE.search(text)
    if bad is not None:
        raise BadRequest(f"{where}: line {_line_of(text, bad.start())}: control characters (such as NUL) are not "
                         "allowed")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadRequest(f"{where}: line {_line_of(text, exc.start)}: not valid Unicode text (a lone "
                         "surrogate)") from None
    reader = csv.reader(io.StringIO(text), strict=True)
    start, physical = 1, None
    items: list[dict[str, Any]] = []
    skipped: list[int] = []
    try:
        header = [h.strip() for h in next(reader, [])]
        names = [h.lower() for h in header]
        text_col = _column(names, TEXT_COLUMNS)
        if text_col is None:
            raise BadRequest(f"{where}: the header (line 1) needs a 'text' (or 'caption') column, got {header}")
        id_col, img_col = _column(names, ID_COLUMNS), _column(names, IMAGE_COLUMNS)
        while True:
            start = reader.line_num + 1
            row = next(reader, None)
            if row is None:
                break
            if not row:  # an empty line
                continue
            end = reader.line_num
            if end > start:  # a quoted field ran over several lines: a caption's line breaks, or a stray quote
                physical = physical if physical is not None else text.split("\n")
                joined = next((n for n in range(start + 1, end + 1) if _row_of_its_own(physical[n - 1], len(header))),
                              None)
                if joined is not None:
                    raise BadRequest(
                        f"{where}: line {start}: a quote opens a field here and closes only on line {end}: lines "
                        f"{start}-{end} were read as one row, yet line {joined} is a row of its own (a stray '\"'? "
                        "a quote inside a quoted field is written twice: \"\")")
            if len(row) > len(header) and any(f.strip() for f in row[len(header):]):
                raise BadRequest(f"{where}: line {start}: {len(row)} fields, the header has {len(header)} (a comma "
                                 "in an unquoted caption? put the caption in double quotes)")

            def cell(col: int | None, row: list[str] = row) -> str:
                return row[col] if col is not None and col < len(row) else ""

            caption = cell(text_col)
            if not caption.strip():
                if skip_blank:
                    skipped.append(start)
                    continue
                raise BadRequest(f"{where}: line {start}: the {header[text_col]!r} is blank (skip_blank leaves "
                                 "such rows out and counts them)")
            item: dict[str, Any] = {"text": caption, "line": start}
            if cell(id_col) != "":
                item["id"] = cell(id_col)
            if cell(img_col):
                item["image_url"] = cell(img_col)
            items.append(item)
            if len(items) > MAX_ITEMS:
                raise BadRequest(f"{where}: too many items: more than {MAX_ITEMS}")
    except csv.Error as exc:  # strict reading: a stray quote, a field over the csv module's limit, a bare \r, ...
        at, why = reader.line_num, str(exc)
        if "expected after" in why and at == start:
            why = ("text follows the closing quote of a quoted field: a quote inside a quoted field is written "
                   "twice (\"\"), and nothing but a comma or the line's end may follow the closing one")
        elif "expected after" in why:
            why = (f"a quote opens a field here and closes only on line {at}, where more text follows it: lines "
                   f"{start}-{at} ran together (a stray '\"' on line {start}?)")
        elif "unexpected end of data" in why:
            why = ("a quote opens a field here and is never closed: every line after it would be read as one "
                   "caption (a stray '\"'? a quote inside a quoted field is written twice: \"\")")
        elif "new-line character" in why:
            why = "not readable as CSV: a line break inside an unquoted field (quote the field, or end lines with " \
                  "\\n or \\r\\n)"
        elif "field limit" in why:
            why = (f"not readable as CSV: a field longer than {csv.field_size_limit():,} characters starts here (a "
                   "quote that is never closed?)")
        else:
            why = f"not readable as CSV: {why}"
        raise BadRequest(f"{where}: line {start}: {why}") from None
    return ItemsFile(items=items, skipped_lines=skipped)


def parse_items_csv(text: str) -> list[dict[str, Any]]:
    """Items from CSV text (see :func:`read_items_csv`), blank texts refused; each item's ``line`` is its file
    line."""
    return read_items_csv(text).items


def _validate_items(raw: list[Any], skipped: int = 0, source: str = "") -> list[dict[str, Any]]:
    """The items of a spec, each named in errors by its file line when it has one (``line``, from a CSV; then
    after ``source``, e.g. ``items_csv: line 12: ...``), else by its 0-based position in the JSON list."""
    if not raw:
        raise BadRequest("item list is empty: an experiment needs at least 2 items"
                         + (f" ({skipped} blank ones left out)" if skipped else ""))
    if len(raw) > MAX_ITEMS:
        raise BadRequest(f"too many items: {len(raw)} > {MAX_ITEMS}")
    seen: dict[str, int] = {}
    out = []
    for i, it in enumerate(raw):
        if isinstance(it, str):
            it = {"text": it}
        if not isinstance(it, dict):
            raise BadRequest(f"item {i}: must be an object with 'text' (and optional 'id', 'image_url')")
        line = it.get("line")
        where = f"{source}: line {line}" if isinstance(line, int) else f"item {i}"
        text = it.get("text")
        if not isinstance(text, str) or not text.strip():
            raise BadRequest(f"{where}: 'text' must be a non-empty string")
        if len(text) > MAX_ITEM_TEXT:
            raise BadRequest(f"{where}: 'text' is {len(text)} characters long; at most {MAX_ITEM_TEXT} are allowed")
        check_text(text, f"{where}: 'text'")
        ext = it.get("id")
        if ext is not None and (isinstance(ext, bool) or not isinstance(ext, str | int)):
            raise BadRequest(f"{where}: 'id' must be a string or an integer")
        if isinstance(ext, str) and len(ext) > MAX_ITEM_ID:
            raise BadRequest(f"{where}: 'id' must be 1..{MAX_ITEM_ID} characters")
        ext = str(i) if ext is None else str(ext).strip()
        if not ext or len(ext) > MAX_ITEM_ID:
            raise BadRequest(f"{where}: 'id' must be 1..{MAX_ITEM_ID} characters")
        check_text(ext, f"{where}: 'id'")
        if ext in seen:
            raise BadRequest(f"{source + ': ' if isinstance(line, int) else ''}duplicate item id {ext!r} "
                             f"({'lines' if isinstance(line, int) else 'items'} "
                             f"{seen[ext]} and {line if isinstance(line, int) else i})")
        seen[ext] = line if isinstance(line, int) else i
        img = it.get("image_url")
        if img is not None:
            check_image_url(img, f"{where}: 'image_url'")
        out.append({"id": ext, "text": text.strip(), "image_url": img})
    if len(out) < 2:
        raise BadRequest(f"an experiment needs at least 2 items, got {len(out)}"
                         + (f" ({skipped} blank ones left out)" if skipped else ""))
    return out


#: the base64 of an items file at most (the request's body is limited to 5 MB anyway)
MAX_ITEMS_FILE_BASE64 = 8_000_000


def _spec_items(spec: dict[str, Any]) -> tuple[list[dict[str, Any]], list[int]]:
    """The validated items of a spec (``items``, ``items_csv`` or ``items_csv_base64``) and the file lines of the
    rows left out for a blank text (``skip_blank``)."""
    given = [key for key in ("items", "items_csv", "items_csv_base64") if spec.get(key) is not None]
    if len(given) > 1:
        raise BadRequest(f"give one of 'items', 'items_csv' and 'items_csv_base64', not both {given[0]!r} and "
                         f"{given[1]!r}")
    skip_blank = spec.get("skip_blank", False)
    if not isinstance(skip_blank, bool):
        raise BadRequest("skip_blank must be true or false")
    if skip_blank and given == ["items"]:
        raise BadRequest("skip_blank applies to an items file (items_csv, items_csv_base64): leave blank items out "
                         "of the 'items' list")
    if given == ["items_csv_base64"]:
        data = spec["items_csv_base64"]
        if not isinstance(data, str) or len(data) > MAX_ITEMS_FILE_BASE64:
            raise BadRequest("items_csv_base64 must be the base64 of the items file (at most 6 MB)")
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise BadRequest("items_csv_base64 is not valid base64") from None
        read = read_items_csv(decode_items_csv(raw), skip_blank, where="items file")
        return _validate_items(read.items, len(read.skipped_lines), "items file"), read.skipped_lines
    if given == ["items_csv"]:
        if not isinstance(spec["items_csv"], str):
            raise BadRequest("items_csv must be CSV text")
        read = read_items_csv(spec["items_csv"], skip_blank)
        return _validate_items(read.items, len(read.skipped_lines), "items_csv"), read.skipped_lines
    raw_items = spec.get("items")
    if raw_items is None:
        raise BadRequest("item list is empty: give 'items' (a JSON list), 'items_csv' (CSV text) or "
                         "'items_csv_base64' (an items file's bytes)")
    if not isinstance(raw_items, list):
        raise BadRequest("items must be a list")
    return _validate_items(raw_items), []


def item_intake(spec: dict[str, Any]) -> dict[str, Any]:
    """What a valid spec's items come to: ``n_items`` created, ``skipped_blank`` rows of the items file left out
    for a blank text and the first :data:`MAX_SKIPPED_LINES` of their lines (``skipped_blank_lines``). Reads
    the items again (a few milliseconds for a contest's thousands of captions); BadRequest as
    :func:`validate_spec` for an invalid one."""
    items, skipped = _spec_items(spec)
    return {"n_items": len(items), "skipped_blank": len(skipped), "skipped_blank_lines": skipped[:MAX_SKIPPED_LINES]}


def _number(x: int | float) -> str:
    """A number for an error message: short even for an integer of a thousand digits."""
    return str(x) if not isinstance(x, int) or abs(x) < 10**20 else f"~{'-' if x < 0 else ''}10**{len(str(abs(x))) - 1}"


def _check_json_numbers(value: Any, where: str, depth: int = 0) -> None:
    """Integers must fit in 64 bits and floats be finite (the learners and the database need both)."""
    if depth > MAX_PARAM_DEPTH:
        raise BadRequest(f"{where}: nested more than {MAX_PARAM_DEPTH} levels deep")
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, str):
        if len(value) > MAX_NAME:
            raise BadRequest(f"{where}: text longer than {MAX_NAME} characters")
        check_text(value, where)
    elif isinstance(value, int):
        if not -MAX_PARAM_INT <= value <= MAX_PARAM_INT:
            raise BadRequest(f"{where}: integer {_number(value)} out of range (|x| <= 2**62)")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise BadRequest(f"{where}: number must be finite, got {value}")
    elif isinstance(value, dict):
        for k, v in value.items():
            check_text(str(k), where)
            _check_json_numbers(v, f"{where}.{str(k)[:40]}", depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_json_numbers(v, f"{where}[{i}]", depth + 1)
    else:
        raise BadRequest(f"{where}: params must be JSON values")


def _validate_labels(raw: list[Any] | None) -> list[dict[str, Any]]:
    if raw is None:
        return [dict(lab) for lab in DEFAULT_LABELS]
    if not isinstance(raw, list) or len(raw) < 2:
        raise BadRequest("labels: give at least 2 labels, each {'name': ..., 'reward': ...}")
    if len(raw) > MAX_LABELS:
        raise BadRequest(f"labels: at most {MAX_LABELS} labels, got {len(raw)}")
    out, seen = [], set()
    for i, lab in enumerate(raw):
        if not isinstance(lab, dict) or not isinstance(lab.get("name"), str) or not lab["name"].strip():
            raise BadRequest(f"label {i}: needs a non-empty 'name'")
        name = lab["name"].strip()
        if len(name) > MAX_LABEL_NAME:
            raise BadRequest(f"label {i}: name is {len(name)} characters long; at most {MAX_LABEL_NAME} are allowed")
        check_text(name, f"label {i}")
        if lab.get("reward") is None:
            raise BadRequest(f"label {name!r} has no reward")
        r = lab["reward"]
        if isinstance(r, bool) or not isinstance(r, int | float):
            raise BadRequest(f"label {name!r}: reward must be a number")
        if not (abs(r) <= MAX_ABS_REWARD if isinstance(r, int) else math.isfinite(r) and abs(r) <= MAX_ABS_REWARD):
            raise BadRequest(f"label {name!r}: reward must be a finite number with |reward| <= {MAX_ABS_REWARD:,.0f}, "
                             f"got {_number(r)}")
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


def default_params(labels: list[dict[str, Any]]) -> dict[str, Any]:
    """The default learner's parameters for these labels: K_inf bounds on the labels' rewards when they are 2 or 3
    values in [0, 1] (the support, stored unless it is the default {0, 1/2, 1}), else :data:`FALLBACK_PARAMS`."""
    rewards = sorted({float(lab["reward"]) for lab in labels})
    if not 2 <= len(rewards) <= 3 or any(not 0.0 <= r <= 1.0 for r in rewards):
        return dict(FALLBACK_PARAMS)
    if rewards == sorted(float(lab["reward"]) for lab in DEFAULT_LABELS):  # the learner's default support
        return dict(DEFAULT_PARAMS)
    return {**DEFAULT_PARAMS, "support": rewards}


def _validate_learner(i: int, entry: dict[str, Any], shortcuts: dict[str, Any], seed: int,
                      labels: list[dict[str, Any]]) -> tuple[LearnerSpec, Learner]:
    where = f"algorithms[{i}]"
    algorithm = entry.get("algorithm") or DEFAULT_ALGORITHM
    if not isinstance(algorithm, str) or len(algorithm) > 64:
        raise BadRequest(f"{where}: 'algorithm' must be a registry name (see `purebandits algorithms`)")
    try:
        cls = get_learner_class(algorithm)
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    params = entry.get("params")
    params = dict(default_params(labels) if algorithm == DEFAULT_ALGORITHM and params is None else params or {})
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
        shortcuts["delta"] = shortcuts["delta"] / cls.error_factor(params)
    for key, value in shortcuts.items():
        if key not in accepted:
            continue  # e.g. budget for a fixed-confidence learner, delta for uniform sampling
        if key in params and params[key] != value:
            raise BadRequest(f"parameter {key!r} given twice with different values")
        params[key] = value
    _check_json_numbers(params, f"{where}.params")
    n_param = params.get("N")
    if isinstance(n_param, int) and not isinstance(n_param, bool) and n_param > MAX_PARAM_N:
        raise BadRequest(f"{where}.params.N: at most {MAX_PARAM_N} (2**16; the default is 8), got {n_param}")
    label = entry.get("label") or cls.__name__
    if not isinstance(label, str) or not _LABEL_RE.match(label):
        raise BadRequest(f"{where}: label must be 1..40 letters, digits, '_', '.' or '-', got {label!r}")
    share = entry.get("share", 1.0)
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= MAX_SHARE:
        raise BadRequest(f"{where}: share must be a positive number of at most {MAX_SHARE:,.0f} (shares are relative), "
                         f"got {share!r}")
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
    support = getattr(learner, "support", None)
    uses = "stop='kinf'" if getattr(learner, "stop", None) == "kinf" else (
        "form='kinf'" if getattr(learner, "form", None) == "kinf" else None)
    if uses is not None and support is not None:
        off = [lab["reward"] for lab in labels if float(lab["reward"]) not in {float(v) for v in support}]
        if off:
            raise BadRequest(f"{where}: {uses} counts each rating value and takes rewards on its support "
                             f"{list(support)}; the label rewards {off} are not on it (set params.support to the "
                             "2 or 3 reward values, in [0, 1])")
    return LearnerSpec(label=label, algorithm=algorithm, params=params, share=float(share), seed=int(lseed)), learner


def validate_spec(spec: dict[str, Any]) -> ExperimentSpec:
    """Check the body of ``POST /api/experiments`` and return what to store; BadRequest names the problem.

    See :func:`_validate_spec` for the keys and the module docstring for the limits. The
    message of a refusal is one line of at most :data:`MAX_DETAIL` characters, ASCII-safe for
    lone surrogates, so a hostile value is never echoed back whole.
    """
    if not isinstance(spec, dict):
        raise BadRequest("the experiment spec must be a JSON object")
    try:
        return _validate_spec(spec)
    except BadRequest as exc:
        raise BadRequest(one_line(exc.message)) from None
    except RecursionError:  # a value nested deeper than the checks above let through
        raise BadRequest("the experiment spec is nested too deeply") from None


def one_line(message: str, limit: int = MAX_DETAIL) -> str:
    """``message`` on one line (runs of whitespace with a line break become one space), at most ``limit``
    characters (cut with an ellipsis), lone surrogates written as ``\\udXXX``."""
    text = re.sub(r"\s*[\r\n\v\f\x85\u2028\u2029]\s*", " ", message)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def _validate_spec(spec: dict[str, Any]) -> ExperimentSpec:
    """Check the body of ``POST /api/experiments`` and return what to store; BadRequest names the problem.

    Keys: ``name``, ``items`` (list of {id, text, image_url} or strings), ``items_csv`` (CSV
    text) or ``items_csv_base64`` (the bytes of an items file, which must be UTF-8; see
    :func:`read_items_csv`), ``skip_blank`` (an items file's rows with a blank text are left out and
    counted instead of refused), ``labels`` (list of {name, reward}; default the caption contest's), one learner as
    ``algorithm`` + ``params`` or several as ``algorithms`` (list of {label, algorithm, params,
    share, seed}), the shortcuts ``k``, ``delta``, ``budget`` (merged into every learner that
    takes them; ``delta`` is the target error probability, default :data:`DEFAULT_DELTA`, and
    a learner proven to err at most ``error_per_delta * delta`` gets it divided by that),
    ``seed``, ``query_expiry_seconds``, ``instructions``, ``image`` ({content_type, data
    (base64)}), ``repeats`` (``never`` or ``not_consecutive``), ``answers_per_participant``, ``query``
    (``rating``, the default, or ``pairwise``: see :func:`_validate_query`), and the crowd's
    settings ``allow_skip``, ``completion_url``, ``gold`` and ``gold_positions``
    (:func:`~purebandits.service.crowd_settings.parse_crowd_settings`).
    """
    name = spec.get("name") or "experiment"
    if not isinstance(name, str) or len(name) > MAX_NAME:
        raise BadRequest(f"name must be a string of at most {MAX_NAME} characters")
    check_text(name, "name")
    items, skipped = _spec_items(spec)
    query = _validate_query(spec, len(items))
    labels = [dict(lab) for lab in PAIRWISE_LABELS] if query == "pairwise" else _validate_labels(spec.get("labels"))
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
    for key, value in shortcuts.items():  # even for learners that ignore them: no 1e400 or 2**70 anywhere
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise BadRequest(f"{key} must be a number, got {type(value).__name__}")
        _check_json_numbers(value, key)
    stages = None
    if query == STAGED:
        stages, shortcuts = _validate_stages(spec, len(items), shortcuts, seed)
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
                          answers_per_participant=per, skipped_blank_lines=skipped, query=query,
                          crowd=parse_crowd_settings(spec, [lab["name"] for lab in labels]), stages=stages)


def _validate_query(spec: dict[str, Any], n_items: int) -> str:
    """The spec's ``query`` (default ``rating``), and for ``pairwise`` what it rules out: a pairwise experiment
    compares two distinct items (at least 2, at most :data:`MAX_PAIRWISE_ITEMS`), its answers are fixed
    (:data:`PAIR_CHOICES`, the learners told :data:`PAIRWISE_LABELS`), and gold items, which have one right
    label per item, do not fit it."""
    query = spec.get("query")
    query = "rating" if query is None else query
    if query not in QUERY_KINDS:
        raise BadRequest(f"query must be one of {list(QUERY_KINDS)}, got {query!r}")
    if query == "rating":
        return query
    if query == STAGED:
        if spec.get("gold") or spec.get("gold_positions"):
            raise BadRequest("gold items are for rating experiments (a known label per item); an experiment of "
                             "ratings then comparisons takes none")
        return query
    if n_items < 2:
        raise BadRequest(f"a pairwise experiment compares two distinct items: give at least 2 items, got {n_items}")
    if n_items > MAX_PAIRWISE_ITEMS:
        raise BadRequest(f"a pairwise experiment takes at most {MAX_PAIRWISE_ITEMS} items (its win matrix is "
                         f"n x n), got {n_items}")
    if spec.get("labels") is not None:
        raise BadRequest("a pairwise experiment's labels are fixed ('left' or 'right' is better, and 'skip' with "
                         "allow_skip): leave 'labels' out")
    if spec.get("gold") or spec.get("gold_positions"):
        raise BadRequest("gold items are for rating experiments (a known label per item); a pairwise experiment "
                         "takes none")
    return query


def _positive_int(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadRequest(f"{name} must be an integer in [{low}, {high}], got {value!r}")
    return value


def _validate_stages(spec: dict[str, Any], n_items: int, shortcuts: dict[str, Any],
                     seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A staged experiment's settings (``query: "rating_then_pairwise"``) and stage 1's learner shortcuts.

    ``top_m`` (2 <= top_m < the number of items, at most :data:`MAX_PAIRWISE_ITEMS`): stage 1's learner finds the
    top ``top_m`` by mean rating (its ``k``); ``ratings_budget`` (optional): stage 1 ends after that many ratings
    told to its learner even if it has not stopped; ``k`` (default 1, below ``top_m``): what stage 2 finds among
    them; ``stage2`` (optional ``{algorithm, params, instructions}``): stage 2's learner (default the service's
    default learner) and the question above the two items. ``delta`` (default :data:`DEFAULT_DELTA`) is the whole
    experiment's error probability, split evenly between the stages (a union bound); each learner turns its half
    into its own parameter as a rating experiment's learner does. One learner per stage (no ``algorithms``), no
    ``budget`` shortcut (``ratings_budget`` is stage 1's), no gold items.
    """
    if n_items < 3:
        raise BadRequest(f"ratings then comparisons needs at least 3 items (top_m of them go on), got {n_items}")
    top_m = spec.get("top_m")
    if top_m is None:
        raise BadRequest("ratings then comparisons needs top_m: how many items stage 1 hands to the comparisons")
    top_m = _positive_int(top_m, "top_m", 2, min(n_items - 1, MAX_PAIRWISE_ITEMS))
    budget = spec.get("ratings_budget")
    if budget is not None:
        budget = _positive_int(budget, "ratings_budget", 1, MAX_PARAM_INT)
    if spec.get("algorithms") is not None:
        raise BadRequest("ratings then comparisons runs one learner per stage: give 'algorithm' / 'params' for "
                         "stage 1 and 'stage2' for stage 2, not 'algorithms'")
    if "budget" in shortcuts:
        raise BadRequest("ratings then comparisons: 'budget' is not taken; 'ratings_budget' ends stage 1")
    k = shortcuts.get("k", 1)
    if isinstance(k, float) or not 1 <= k < top_m:
        raise BadRequest(f"k (what stage 2 finds among the top_m) must be an integer in [1, top_m - 1 = "
                         f"{top_m - 1}], got {k!r}")
    delta = shortcuts.get("delta", DEFAULT_DELTA)
    if not 0 < delta < 1:
        raise BadRequest(f"delta must be in (0, 1): it is the target error probability, got {delta!r}")
    stage2 = spec.get("stage2") or {}
    if not isinstance(stage2, dict) or set(stage2) - {"algorithm", "params", "instructions", "label"}:
        raise BadRequest("stage2 must be an object {algorithm, params, instructions, label}")
    instructions = stage2.get("instructions")
    if instructions is not None:
        if not isinstance(instructions, str) or len(instructions) > MAX_INSTRUCTIONS:
            raise BadRequest(f"stage2.instructions must be text of at most {MAX_INSTRUCTIONS} characters")
        check_text(instructions, "stage2.instructions")
        instructions = instructions.strip() or None
    seed2 = (seed + 1000) % 2**63
    try:
        ls, learner = _validate_learner(0, stage2, {"k": k, "delta": delta / 2}, seed2, PAIRWISE_LABELS)
    except BadRequest as exc:
        raise BadRequest("stage2: " + exc.message.removeprefix("algorithms[0]: ")) from None
    try:
        learner.start(top_m, seed=ls.seed)
        learner.recommend()
    except Exception:  # a value the learner refuses on top_m items: still the client's input
        raise BadRequest(f"stage2: bad parameter for {ls.algorithm}: it cannot start on {top_m} items with "
                         f"{ls.params}") from None
    stages = {"kind": STAGED, "top_m": top_m, "ratings_budget": budget, "delta": float(delta),
              "stage_delta": float(delta) / 2, "k": int(k),
              "stage2": {"label": ls.label, "algorithm": ls.algorithm, "params": ls.params, "seed": ls.seed,
                         "instructions": instructions}}
    return stages, {"k": top_m, "delta": float(delta) / 2}
