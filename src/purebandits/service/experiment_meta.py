"""What every part of :class:`~purebandits.service.study.Study` shares: an experiment's immutable settings
(:class:`ExperimentMeta`), a cached learner, what a transaction still has to write, and owner tokens."""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from purebandits.base import Learner
from purebandits.service.crowd_settings import SKIP_LABEL, CrowdSettings
from purebandits.service.errors import (
    NotFound,
)
from purebandits.service.validation import (
    PAIR_CHOICES,
    STAGED,
    LearnerSpec,
)

log = logging.getLogger("purebandits.service")

def hash_token(token: str) -> str:
    """Owner tokens are stored as their SHA-256 (hex); a database leak does not reveal them."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A random owner token (32 URL-safe characters) that does not start with '-' (a command line would read
    ``--token -x...`` as an option)."""
    while True:
        token = secrets.token_urlsafe(24)
        if token[0].isalnum():
            return token


def now_ms() -> int:
    """The time in epoch milliseconds (the clock a Study uses unless a test injects one)."""
    return int(time.time() * 1000)


@dataclass
class ExperimentMeta:
    """The immutable part of an experiment, cached per process."""

    id: int
    name: str
    k: int
    n_arms: int
    labels: list[dict[str, Any]]
    created_ms: int
    expiry_s: float
    learners: list[LearnerSpec]
    instructions: str | None
    repeats: str
    answers_per_participant: int | None
    code_secret: str
    has_image: bool
    items: list[dict[str, Any]] = field(default_factory=list)
    crowd: CrowdSettings = field(default_factory=CrowdSettings)
    #: what its queries ask: "rating", "pairwise" or "rating_then_pairwise" (validation.QUERY_KINDS)
    query: str = "rating"
    #: a staged experiment's stage settings (on stage 1, the experiment participants use) or its switch record (on
    #: the stage 2 experiment the switch created): :mod:`purebandits.service.stages`; None otherwise
    stages: dict[str, Any] | None = None
    #: a stage 2 experiment: the id of the staged experiment whose stage 1 started it
    stage_of: int | None = None

    @property
    def rewards(self) -> dict[str, float]:
        """The learners' labels and their rewards (a pairwise experiment's: won 1, lost 0)."""
        return {lab["name"]: float(lab["reward"]) for lab in self.labels}

    @property
    def pairwise(self) -> bool:
        """Whether a query shows two items and asks which is better (the Borda reduction)."""
        return self.query == "pairwise"

    @property
    def staged(self) -> bool:
        """Whether this is a staged experiment's stage 1: ratings that hand their top m to comparisons."""
        return self.query == STAGED

    @property
    def answer_labels(self) -> list[str]:
        """The labels a participant answers with (the buttons; ``skip`` too where allowed is not listed): a rating
        experiment's labels, or ``left`` / ``right`` in a pairwise one."""
        return list(PAIR_CHOICES) if self.pairwise else [lab["name"] for lab in self.labels]

    def accepts(self, label: str) -> bool:
        """Whether ``label`` is an answer a participant may give (:attr:`answer_labels`, or ``skip`` if allowed)."""
        return label in self.answer_labels or (label == SKIP_LABEL and self.crowd.allow_skip)

    def assign(self, pid: str) -> int:
        """The learner participant ``pid`` is assigned to: by share, sticky (a hash, same in every process)."""
        if len(self.learners) == 1:
            return 0
        h = hashlib.sha256(f"{self.id}:{pid}".encode()).digest()
        u = int.from_bytes(h[:8], "big") / 2.0**64
        acc = 0.0
        for i, ls in enumerate(self.learners):
            acc += ls.share
            if u < acc:
                return i
        return len(self.learners) - 1

    def learner_index(self, label: str | None) -> int:
        """Index of the learner called ``label`` (the first one if None); NotFound otherwise."""
        if label is None:
            return 0
        for i, ls in enumerate(self.learners):
            if ls.label == label:
                return i
        raise NotFound(f"experiment {self.id} has no learner {label!r}; its learners: "
                       f"{[ls.label for ls in self.learners]}")

    def completion_code(self, pid: str) -> str:
        """The code a participant who reached ``answers_per_participant`` is shown (an HMAC the owner can check)."""
        mac = hmac.new(self.code_secret.encode(), f"{self.id}:{pid}".encode(), hashlib.sha256).digest()
        return base64.b32encode(mac[:10]).decode()[:12]


class Due(NamedTuple):
    """What a learner's changes in a transaction still have to write: a snapshot (its version crossed a
    multiple of ``snapshot_every``), a history point, and whether it stopped in this transaction."""

    snapshot: bool
    history: bool
    stopped: bool


@dataclass
class CachedLearner:
    """A learner cached by a process with the version of its log it reflects."""

    version: int
    learner: Learner


def limit_key(address: str) -> str:
    """The part of a client address the per-address limits count: an IPv6 address by its /64 (one host
    usually holds a whole /64, so counting single addresses would give it 2**64 budgets), an IPv4-mapped
    IPv6 address as its IPv4 address, anything else (IPv4, a name, "unknown") as it is."""
    try:
        ip = ipaddress.ip_address(address.strip().split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))
    return str(ip)


def origin_hash(address: str | None) -> str | None:
    """What the database keeps of a client address for the rate limits: a hash of its :func:`limit_key`
    (pseudonymous only, as IPv4 addresses are few enough to try them all), the same in every process."""
    if address is None:
        return None
    key = limit_key(address)
    return hashlib.sha256(b"purebandits-origin:" + key.encode("utf-8", "replace")).hexdigest()[:32]
