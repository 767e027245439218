"""An experiment's settings for a real crowd: a skip button, a crowd platform's completion URL, gold items.

- **Skip** (``allow_skip``): the rating page shows a "can't decide" button; its answer is the label
  :data:`SKIP_LABEL`, recorded and exported with the others but never told to a learner as a reward (the
  learner's pull is cancelled, as for an expired query).
- **Completion URL** (``completion_url``): where the page sends a participant who has given
  ``answers_per_participant`` answers, e.g. Prolific's ``https://app.prolific.com/submissions/complete?cc=CODE``;
  ``{code}`` in it is replaced by the participant's completion code.
- **Gold items** (``gold``, ``gold_positions``): items whose answer is known, shown to every participant at
  set positions of their session (the validation questions of crowd work; NEXT's successor Salmon samples
  the same queries at set positions), never told to a learner; a participant who gets them wrong is flagged
  (:mod:`purebandits.service.rater_quality`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from purebandits.service.errors import BadRequest

__all__ = ["SKIP_LABEL", "CrowdSettings", "parse_crowd_settings", "MTURK_PREVIEW"]

#: the answer of the skip button ("can't decide"); no label of an experiment with skips may have this name
SKIP_LABEL = "skip"
#: the ``assignmentId`` Mechanical Turk passes while a worker previews a HIT before accepting it
MTURK_PREVIEW = "ASSIGNMENT_ID_NOT_AVAILABLE"
MAX_GOLD = 100
MAX_GOLD_TEXT = 2000
MAX_URL = 2000


@dataclass(frozen=True)
class CrowdSettings:
    """What an experiment asks of its crowd beyond the learner's queries (see the module docstring)."""

    allow_skip: bool = False
    completion_url: str | None = None
    gold: tuple[dict[str, str], ...] = ()
    gold_positions: tuple[int, ...] = field(default=())

    def to_json(self) -> dict[str, Any] | None:
        """What ``experiments.crowd`` stores (None for the defaults: nothing to store)."""
        if self == CrowdSettings():
            return None
        return {"allow_skip": self.allow_skip, "completion_url": self.completion_url, "gold": list(self.gold),
                "gold_positions": list(self.gold_positions)}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> CrowdSettings:
        """The settings ``experiments.crowd`` holds (None: the defaults)."""
        if not data:
            return cls()
        return cls(allow_skip=bool(data.get("allow_skip")), completion_url=data.get("completion_url"),
                   gold=tuple(dict(g) for g in data.get("gold") or ()),
                   gold_positions=tuple(int(p) for p in data.get("gold_positions") or ()))

    def gold_at(self, position: int) -> int | None:
        """The gold item shown at session position ``position`` (1-based), or None: the i-th gold position shows
        gold item ``i mod len(gold)``, so every participant sees the same gold at the same position."""
        try:
            i = self.gold_positions.index(position)
        except ValueError:
            return None
        return i % len(self.gold)

    def completion_redirect(self, code: str) -> str | None:
        """The completion URL with ``{code}`` replaced by ``code`` (URL-quoted), or None when none is set."""
        if self.completion_url is None:
            return None
        return self.completion_url.replace("{code}", quote(code, safe=""))


def parse_crowd_settings(spec: dict[str, Any], label_names: list[str]) -> CrowdSettings:
    """The crowd settings of a create spec (keys ``allow_skip``, ``completion_url``, ``gold``,
    ``gold_positions``); BadRequest names what is wrong."""
    allow_skip = spec.get("allow_skip", False)
    if not isinstance(allow_skip, bool):
        raise BadRequest(f"allow_skip must be true or false, got {allow_skip!r}")
    if allow_skip and SKIP_LABEL in label_names:
        raise BadRequest(f"a label is named {SKIP_LABEL!r}, the skip button's answer: rename it or set allow_skip "
                         "to false")
    url = spec.get("completion_url")
    if url is not None:
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or len(url) > MAX_URL or parts.scheme not in ("http", "https") or not parts.netloc \
                or any(c in url for c in "\r\n\t "):
            raise BadRequest(f"completion_url must be an http(s) URL of at most {MAX_URL} characters without "
                             f"spaces, such as https://app.prolific.com/submissions/complete?cc=CODE; got {url!r}")
    gold_in = spec.get("gold") or []
    if not isinstance(gold_in, list) or len(gold_in) > MAX_GOLD:
        raise BadRequest(f"gold must be a list of at most {MAX_GOLD} items {{id, text, label}}")
    gold = []
    for i, g in enumerate(gold_in):
        if not isinstance(g, dict) or not isinstance(g.get("text"), str) or not g["text"].strip() \
                or len(g["text"]) > MAX_GOLD_TEXT:
            raise BadRequest(f"gold[{i}] must be an object with a non-empty text of at most {MAX_GOLD_TEXT} "
                             "characters and its known label")
        if g.get("label") not in label_names:
            raise BadRequest(f"gold[{i}]: label must be one of {label_names}, got {g.get('label')!r}")
        gid = g.get("id", f"gold-{i + 1}")
        if not isinstance(gid, str) or not 1 <= len(gid) <= 200:
            raise BadRequest(f"gold[{i}]: id must be text of 1..200 characters")
        gold.append({"id": gid, "text": g["text"].strip(), "label": g["label"]})
    if len({g["id"] for g in gold}) != len(gold):
        raise BadRequest("gold: ids must be unique")
    positions = spec.get("gold_positions") or []
    if not isinstance(positions, list) or len(positions) > MAX_GOLD or \
            not all(isinstance(p, int) and not isinstance(p, bool) and 1 <= p <= 1_000_000 for p in positions) or \
            len(set(positions)) != len(positions):
        raise BadRequest(f"gold_positions must be a list of at most {MAX_GOLD} distinct session positions "
                         "(1 = a participant's first item)")
    if bool(gold) != bool(positions):
        raise BadRequest("give gold items together with gold_positions (where in a session they are shown)")
    return CrowdSettings(allow_skip=allow_skip, completion_url=url, gold=tuple(gold),
                         gold_positions=tuple(sorted(positions)))
