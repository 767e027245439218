"""Request and response bodies of the HTTP API (separate from the database tables)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class ItemIn(BaseModel):
    """One item to rate (a caption): its text, and optionally an external id and an image."""

    model_config = ConfigDict(extra="forbid")
    id: str | int | None = Field(None, description="external id, unique in the experiment (default: position)")
    text: str = Field(..., description="text shown to participants (rendered as text, never as HTML)")
    image_url: str | None = Field(None, description="optional http(s) URL or absolute path of an image")


class LabelIn(BaseModel):
    """One answer a participant can give, with the reward the learner receives for it."""

    model_config = ConfigDict(extra="forbid")
    name: str
    reward: float | None = Field(None, description="reward the learner receives for this label (required)")


class ExperimentCreate(BaseModel):
    """A new experiment: items (JSON list or CSV text), labels with rewards, algorithm and parameters."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(None, max_length=200)
    items: list[ItemIn | str] | None = Field(None, description="items as objects or plain strings")
    items_csv: str | None = Field(None, description="CSV text with header text (or caption)[,id][,image_url]")
    labels: list[LabelIn] | None = Field(
        None, description="label set with rewards; default unfunny / somewhat funny / funny = 0 / 0.5 / 1")
    algorithm: str = Field("lil_ucb", description="registry name of the learner (see `purebandits algorithms`)")
    params: dict[str, Any] = Field(default_factory=dict, description="learner parameters")
    k: int | None = Field(None, description="size of the top set (shortcut for params.k)")
    delta: float | None = Field(None, description="error probability (shortcut for params.delta)")
    budget: int | None = Field(None, description="fixed budget (shortcut for params.budget)")
    seed: int | None = Field(None, description="learner seed (random if absent); with the log it fixes the state")
    query_expiry_seconds: float | None = Field(None, description="pending queries expire after this (server default)")

    def to_spec(self) -> dict[str, Any]:
        """The request as the plain dict :meth:`Study.create_experiment` takes (unset fields left out)."""
        spec = self.model_dump(exclude_none=True)
        if self.items is not None:
            spec["items"] = [it if isinstance(it, str) else it.model_dump() for it in self.items]
        if self.labels is not None:
            spec["labels"] = [lab.model_dump() for lab in self.labels]
        return spec


class ValidationIssue(BaseModel):
    """One problem of a malformed request (where it is, what is wrong)."""

    loc: list[str | int] = Field(..., description="where: e.g. ['body', 'participant_id']")
    msg: str
    type: str


class ErrorOut(BaseModel):
    """Every error response: ``detail`` is a message that names the problem."""

    detail: str
    errors: list[ValidationIssue] | None = Field(None, description="422 on malformed requests: each problem")


_ERROR_TEXT = {
    400: "the body could not be parsed (not UTF-8 JSON)",
    401: "missing or invalid token",
    403: "not allowed for this participant",
    404: "no such object",
    409: "conflicts with the current state",
    410: "the query expired",
    413: "request body too large",
    422: "malformed request or invalid value",
    429: "too many requests (see Retry-After)",
    503: "database unavailable, retry shortly (see Retry-After)",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the error statuses an endpoint can return (all ``ErrorOut``)."""
    return {c: {"model": ErrorOut, "description": _ERROR_TEXT[c]} for c in codes}


class ExperimentCreated(BaseModel):
    """The new experiment's id, its owner token (shown only here) and its two URLs."""

    id: int
    owner_token: str = Field(..., description="shown once; send it as 'Authorization: Bearer <token>'")
    participant_url: str
    dashboard_url: str


class ExperimentInfo(BaseModel):
    """An experiment's settings and state, for its owner: ``version`` counts the events (queries
    handed out, answers, cancellations) applied to its learner; ``created_at`` is Unix seconds."""

    id: int
    name: str
    algorithm: str
    params: dict[str, Any]
    k: int
    n_items: int
    labels: list[dict[str, Any]]
    status: str
    version: int
    seed: int
    query_expiry_seconds: float
    created_at: float


class ExperimentPublic(BaseModel):
    """What a participant may see of an experiment: its name, labels and status."""

    id: int
    name: str
    labels: list[str]
    status: str


class StatusOut(BaseModel):
    """An experiment's status after pause / resume / stop (active, paused or stopped)."""

    id: int
    status: str


class ParticipantOut(BaseModel):
    """A new anonymous participant id, to send with every query and answer."""

    participant_id: str


class QueryRequest(BaseModel):
    """Ask for the next item to rate."""

    model_config = ConfigDict(extra="forbid")
    participant_id: str = Field(..., max_length=64)


class ItemOut(BaseModel):
    """The item to rate (``id`` is its external id)."""

    id: str
    text: str
    image_url: str | None = None


class QueryOut(BaseModel):
    """The next item to rate with the labels to choose from, or why there is none right now."""

    state: Literal["ok", "waiting", "done", "paused", "stopped"] = Field(
        ..., description="'ok' with a query; otherwise why there is none now (retry after retry_after seconds)")
    query_id: str | None = None
    experiment_id: int | None = None
    item: ItemOut | None = None
    labels: list[str] | None = None
    expires_at: float | None = None
    retry_after: float | None = None


class AnswerRequest(BaseModel):
    """A participant's label for a query it was handed."""

    model_config = ConfigDict(extra="forbid")
    participant_id: str = Field(..., max_length=64)
    label: str = Field(..., max_length=100)


class AnswerOut(BaseModel):
    """The acknowledged answer: once this arrives, the answer is stored for good."""

    query_id: str
    status: Literal["answered"]
    label: str
    reward: float


class LearnerState(BaseModel):
    """The learner's full state (``state_dict``) at the experiment's ``version``."""

    version: int
    state: dict[str, Any]
