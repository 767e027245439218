"""Request and response bodies of the HTTP API (separate from the database tables)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt


class ItemIn(BaseModel):
    """One item to rate (a caption): its text, and optionally an external id and an image."""

    model_config = ConfigDict(extra="forbid")
    id: str | int | None = Field(
        None, description="external id, unique in the experiment, at most 200 characters (default: position)")
    text: str = Field(..., description="text shown to participants (rendered as text, never as HTML), "
                      "at most 2,000 characters")
    image_url: str | None = Field(
        None, description="optional image: an absolute http(s) URL (with a host, no credentials) or a path starting "
        "with a single '/'; at most 2,000 characters; protocol-relative '//host', javascript:, data: and other "
        "schemes, backslashes and control characters are refused")


class LabelIn(BaseModel):
    """One answer a participant can give, with the reward the learner receives for it."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(..., description="the label's text on its button, at most 100 characters")
    reward: float | None = Field(
        None, description="reward the learner receives for this label (required; finite, |reward| <= 1e6)")


class LearnerIn(BaseModel):
    """One of several learners run side by side on the same items; participants are split by share."""

    model_config = ConfigDict(extra="forbid")
    label: str | None = Field(None, description="unique name, [A-Za-z0-9_.-]{1,40} (default: the class name)")
    algorithm: str = Field(..., description="registry name of the learner (see `purebandits algorithms`)")
    params: dict[str, Any] = Field(default_factory=dict, description="learner parameters")
    share: float = Field(1.0, description="relative share of participants assigned to it, in (0, 1e6]")
    seed: int | None = Field(None, description="its seed (default: the experiment's seed + its position)")


class ImageIn(BaseModel):
    """A context image shown above every item (for example the cartoon of a caption contest)."""

    model_config = ConfigDict(extra="forbid")
    content_type: Literal["image/png", "image/jpeg", "image/gif", "image/webp"]
    data: str = Field(..., description="the file, base64-encoded (at most 2 MB decoded)")


class GoldItemIn(BaseModel):
    """A gold item: a text whose right label is known."""

    model_config = ConfigDict(extra="forbid")
    id: str | None = Field(None, max_length=200, description="its id in the exports (default gold-1, gold-2, ...)")
    text: str = Field(..., max_length=2000)
    label: str = Field(..., max_length=100, description="the right label (one of the experiment's)")


class ExperimentCreate(BaseModel):
    """A new experiment: items (JSON list or CSV text), labels with rewards, learners, context and policies."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = Field(None, max_length=200)
    items: list[ItemIn | str] | None = Field(
        None, description="items as objects or plain strings (texts of at most 2,000 characters)")
    items_csv: str | None = Field(None, description="CSV text with header text (or caption)[,id][,image_url]")
    labels: list[LabelIn] | None = Field(
        None, description="2..50 labels with rewards; default unfunny / somewhat funny / funny = 0 / 0.5 / 1")
    algorithm: str | None = Field(None, description="registry name of the one learner (see `purebandits "
                                  "algorithms`); default: the service's default learner (docs/service.md)")
    params: dict[str, Any] | None = Field(None, description="parameters of the one learner")
    algorithms: list[LearnerIn] | None = Field(
        None, description="several learners side by side (instead of algorithm / params)")
    k: int | None = Field(None, description="size of the top set (shortcut for params.k)")
    delta: float | None = Field(None, description="error probability (shortcut for params.delta)")
    budget: int | None = Field(None, description="fixed budget (shortcut for params.budget)")
    seed: int | None = Field(None, description="learner seed (random if absent); with the log it fixes the state")
    query_expiry_seconds: float | None = Field(None, description="pending queries expire after this (server default)")
    instructions: str | None = Field(None, description="plain text shown above the item (at most 2000 characters)")
    image: ImageIn | None = Field(None, description="context image shown above every item")
    repeats: Literal["never", "not_consecutive"] | None = Field(
        None, description="'never' (default): an item at most once per participant while unseen items remain; "
        "'not_consecutive': never the same item twice in a row")
    answers_per_participant: int | None = Field(
        None, description="after this many answers a participant is thanked with a completion code")
    allow_skip: bool | None = Field(None, description="show a skip (can't decide) button; its answers are recorded "
                                    "with the label 'skip' and never told to a learner")
    completion_url: str | None = Field(
        None, max_length=2000, description="where the page sends a participant with a completion code (e.g. "
        "https://app.prolific.com/submissions/complete?cc=CODE); {code} in it becomes their code")
    gold: list[GoldItemIn] | None = Field(None, description="gold items: known answers shown at gold_positions, "
                                          "never told to a learner; a participant who gets them wrong is flagged")
    gold_positions: list[int] | None = Field(None, description="the session positions (1 = first item) at which "
                                             "gold items are shown, the i-th position showing gold item i mod len")
    query: Literal["rating", "pairwise", "rating_then_pairwise"] | None = Field(
        None, description="'rating' (default): one item per query, rated with a label; 'pairwise': two items per "
        "query ('items': [left, right]), answered 'left' or 'right' (the better one; 'skip' with allow_skip). The "
        "learner picks one item, the other is drawn uniformly, and it is told 1 if its item won (the Borda "
        "reduction). Labels are fixed and gold items do not apply. 'rating_then_pairwise': ratings until the "
        "learner has found the top top_m (or at ratings_budget), then comparisons among them, by itself")
    top_m: int | None = Field(None, description="rating_then_pairwise: how many items stage 1 hands to the "
                              "comparisons (2 <= top_m < items)")
    ratings_budget: int | None = Field(None, description="rating_then_pairwise: stage 1 ends after this many "
                                       "ratings even if its learner has not stopped (then not proven)")
    stage2: dict[str, Any] | None = Field(None, description="rating_then_pairwise: stage 2's {algorithm, params, "
                                          "instructions, label} (default: the service's default learner)")

    def to_spec(self) -> dict[str, Any]:
        """The request as the plain dict :meth:`Study.create_experiment` takes (unset fields left out)."""
        spec = self.model_dump(exclude_none=True)
        if self.gold is not None:
            spec["gold"] = [g.model_dump(exclude_none=True) for g in self.gold]
        if self.items is not None:
            spec["items"] = [it if isinstance(it, str) else it.model_dump() for it in self.items]
        if self.labels is not None:
            spec["labels"] = [lab.model_dump() for lab in self.labels]
        if self.algorithms is not None:
            spec["algorithms"] = [a.model_dump(exclude_none=True) for a in self.algorithms]
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


class ErrorGuaranteeInfo(BaseModel):
    """What a learner's delta promises (:func:`purebandits.error_guarantee.error_guarantee`)."""

    error_probability: float | None = Field(description="the error probability asked of it: learner_delta x "
                                                         "error_per_delta (None if it takes no delta)")
    learner_delta: float | None = Field(description="the parameter delta the learner runs with")
    error_per_delta: float = Field(description="its proof bounds the error by error_per_delta x delta")
    proven: bool = Field(description="whether a published proof bounds its error by error_probability")
    delta_note: str = Field(description="the same in words for the owner, with the reason")


class LearnerInfo(BaseModel):
    """One learner of an experiment: its settings, version (events in its log) and whether it stopped."""

    label: str
    algorithm: str
    params: dict[str, Any]
    share: float
    seed: int
    version: int
    done: bool
    stopped_at_answers: int | None = None
    error: ErrorGuaranteeInfo | None = None


class ExperimentInfo(BaseModel):
    """An experiment's settings and state, for its owner: ``version`` counts the events (queries
    handed out, answers, cancellations) applied to its learners; ``created_at`` is Unix seconds;
    ``algorithm``, ``params`` and ``seed`` are the first learner's."""

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
    instructions: str | None = None
    has_image: bool = False
    repeats: str = "never"
    answers_per_participant: int | None = None
    crowd: dict[str, Any] | None = Field(None, description="the crowd settings: allow_skip, completion_url, gold, "
                                         "gold_positions (null: none)")
    query: Literal["rating", "pairwise", "rating_then_pairwise"] = Field(
        "rating", description="what a query asks; in a pairwise experiment 'labels' are the learners' (won 1, lost 0)")
    algorithms: list[LearnerInfo] = Field(default_factory=list)
    stages: dict[str, Any] | None = Field(None, description="a staged experiment (rating_then_pairwise) or its "
                                          "stage 2: the stage running, stage 1's top m, stage 2's experiment id, "
                                          "the winner (docs/service.md, 'Ratings then comparisons')")


class ExperimentSummary(BaseModel):
    """One experiment in the admin's list."""

    id: int
    name: str
    status: str
    n_items: int
    n_answers: int
    algorithms: list[str]
    created_at: float
    participant_url: str
    dashboard_url: str = Field(..., description="without the owner token (the owner adds #token=...)")


class ExperimentList(BaseModel):
    """Every experiment, oldest first."""

    experiments: list[ExperimentSummary]


class Deleted(BaseModel):
    """The experiment and all its rows are gone."""

    id: int
    deleted: bool


class ExperimentPublic(BaseModel):
    """What a participant may see of an experiment: name, labels, status, instructions, context image."""

    id: int
    name: str
    query: Literal["rating", "pairwise"] = Field("rating", description="'pairwise': each query shows two items, "
                                                 "answered 'left' or 'right'")
    labels: list[str] = Field(..., description="the answers' labels (the buttons): 'left' and 'right' in a "
                              "pairwise experiment")
    status: str
    instructions: str | None = None
    image_url: str | None = Field(None, description="the context image, or null")
    answers_per_participant: int | None = None
    allow_skip: bool = Field(False, description="the page shows a skip (can't decide) button; its label is 'skip'")
    complete: bool = Field(False, description="every learner has stopped, or the experiment is stopped or "
                           "archived: no more answers are needed (close recruitment)")
    example: str | None = Field(None, description="an item's text, for a preview (Mechanical Turk shows one "
                                "before a worker accepts)")


class StatusOut(BaseModel):
    """An experiment's status after pause / resume / stop (active, paused or stopped)."""

    id: int
    status: str


class ParticipantIn(BaseModel):
    """Register a participant id of your own (a crowd platform's worker id); leave out for a random one."""

    model_config = ConfigDict(extra="forbid")
    participant_id: str | None = Field(
        None, max_length=36,
        description="1..36 printable characters, not starting with '=', '+', '-' or '@' (spreadsheet formulas)")
    experiment_id: int | None = Field(None, ge=1, description="with platform: the experiment the session is for")
    platform: Literal["prolific", "mturk"] | None = Field(
        None, description="the crowd platform the id comes from (Prolific's PROLIFIC_PID, MTurk's workerId)")
    study: str | None = Field(None, max_length=100, description="Prolific's STUDY_ID or MTurk's hitId")
    session: str | None = Field(None, max_length=100, description="Prolific's SESSION_ID or MTurk's assignmentId")


class ParticipantOut(BaseModel):
    """A new anonymous participant id, to send with every query and answer."""

    participant_id: str


class QueryRequest(BaseModel):
    """Ask for the next item to rate, or for ``n`` of them at once."""

    model_config = ConfigDict(extra="forbid")
    participant_id: str = Field(..., max_length=64)
    n: StrictInt | None = Field(
        None, ge=1, le=10, description="ask for up to n items at once (1-10): the response then lists them in "
        "'queries', each with its own query_id and expiry; the participant's pending queries come first. Without "
        "n, one query in the response itself")


class ItemOut(BaseModel):
    """The item to rate (``id`` is its external id)."""

    id: str
    text: str
    image_url: str | None = None


class QueryItem(BaseModel):
    """One query of a multi-item ask: an item to rate, with its own id and expiry."""

    state: Literal["ok"] = "ok"
    query_id: str
    experiment_id: int
    item: ItemOut | None = Field(None, description="the item to rate (a rating experiment)")
    items: list[ItemOut] | None = Field(None, description="a pairwise experiment: [left, right], two distinct items "
                                        "in the order to show them")
    labels: list[str]
    expires_at: float
    n_answered: int | None = None


class QueryOut(BaseModel):
    """The next item to rate with the labels to choose from (or, asked with ``n``, a list of them), or why there
    is none right now."""

    state: Literal["ok", "waiting", "done", "paused", "stopped", "archived", "exhausted", "complete",
                   "excluded"] = Field(
        ..., description="'ok' with a query (or with 'queries' when asked with n); otherwise why there is none now "
        "(retry after retry_after seconds): 'waiting' = the learner needs answers back first; 'complete' = "
        "answers_per_participant reached (see completion_code); 'done' = this participant's learner has stopped "
        "(with study_complete: true when every learner has, and then a completion code when the participant "
        "answered anything and the experiment pays by code); 'excluded' = the owner excluded this "
        "participant; 'exhausted' is no longer sent (a participant "
        "is served while any item is allowed to them) but kept for clients written against it")
    query_id: str | None = None
    experiment_id: int | None = None
    item: ItemOut | None = None
    items: list[ItemOut] | None = Field(None, description="a pairwise experiment's query: [left, right], two "
                                        "distinct items (instead of 'item'), answered 'left' or 'right'")
    labels: list[str] | None = None
    expires_at: float | None = None
    queries: list[QueryItem] | None = Field(None, description="asked with n: up to n queries, distinct items")
    retry_after: float | None = None
    n_answered: int | None = Field(None, description="this participant's answers in this experiment")
    completion_code: str | None = Field(None, description="with state 'complete': the code to show the organizer")
    completion_url: str | None = Field(None, description="with a completion code: where to send the participant "
                                       "(the experiment's completion_url, e.g. Prolific's, with the code)")
    study_complete: bool | None = Field(None, description="with state 'done': whether every learner of the "
                                        "experiment has stopped (no more answers are needed: close recruitment)")


class AnswerRequest(BaseModel):
    """A participant's label for a query it was handed."""

    model_config = ConfigDict(extra="forbid")
    participant_id: str = Field(..., max_length=64)
    label: str = Field(..., max_length=100)


class ReleaseRequest(BaseModel):
    """A participant giving back a query they will not answer."""

    model_config = ConfigDict(extra="forbid")
    participant_id: str = Field(..., max_length=64)


class ReleaseOut(BaseModel):
    """What became of the query: released (now or before), or already answered."""

    query_id: str
    status: Literal["released", "answered"]


class AnswerOut(BaseModel):
    """The acknowledged answer: once this arrives, the answer is stored for good."""

    query_id: str
    status: Literal["answered"]
    label: str
    reward: float | None = Field(..., description="null for a skip or a gold item (nothing is told to a learner)")


class LearnerState(BaseModel):
    """A learner's full state (``state_dict``) at its ``version``."""

    version: int
    state: dict[str, Any]


class HistoryLeader(BaseModel):
    """One of the leaders at a history point: its rank then, mean, the learner's own interval (raw, not
    clipped to the reward range; null where unbounded) and answers."""

    rank: int
    arm: int
    id: str
    text: str
    mean: float | None
    lower: float | None
    upper: float | None
    count: int


class HistoryPoint(BaseModel):
    """A learner's state after ``n_answers`` of its answers (written every ``history_every`` answers and when
    it stopped): its stopping progress by its own rule and its leaders."""

    n_answers: int
    t: float = Field(description="when, in Unix seconds")
    done: bool
    fraction: float = Field(description="stopping progress in [0, 1] by the learner's own rule (1 once done)")
    margin: float | None = Field(description="the rule's statistic minus its threshold (>= 0 stops), or null")
    leaders: list[HistoryLeader]


class HistorySeries(BaseModel):
    """One learner's points, in answer order."""

    algorithm: str = Field(description="the learner's label")
    points: list[HistoryPoint]


class HistoryOut(BaseModel):
    """Each learner's results over time."""

    every: int = Field(description="answers of a learner between two points (the server's history_every)")
    series: list[HistorySeries]


class Histogram(BaseModel):
    """Counts between consecutive ``edges`` (``len(counts) == len(edges) - 1``; both empty without data)."""

    edges: list[float]
    counts: list[int]


class AnswersPerParticipant(Histogram):
    """Answers per participant: integer bins (about 30 of growing width above 40)."""

    mean: float | None
    median: float | None
    max: int


class ParticipantsActivity(BaseModel):
    """The participants who answered this learner."""

    n: int = Field(description="participants with at least one answer")
    answers: AnswersPerParticipant


class ResponseSeconds(Histogram):
    """Seconds from a query's issue to its answer, over the latest ``window`` answers: 30 bins up to the 99th
    percentile, the slower ones counted in ``above``."""

    median: float | None
    p90: float | None
    above: int
    n: int
    window: int


class Timeline(BaseModel):
    """Answers per time bucket (at most about 120 buckets since the experiment began)."""

    bucket_seconds: float
    buckets: list[tuple[float, int]] = Field(description="[bucket start in Unix seconds, answers]")


class ActivityOut(BaseModel):
    """One learner's activity: answers over time, answers per item in rank order, participants, response times."""

    algorithm: str
    timeline: Timeline
    answers_per_item: list[int]
    participants: ParticipantsActivity
    response_seconds: ResponseSeconds


class ExclusionIn(BaseModel):
    """Exclude a participant (their answers are kept in the log and the exports, and every learner is rebuilt
    without them), or include them again."""

    model_config = ConfigDict(extra="forbid")
    participant_id: str = Field(..., max_length=36)
    excluded: bool = Field(True, description="true: exclude; false: include again")
    reason: str | None = Field(None, max_length=200, description="a note kept with the exclusion")


class ExclusionOut(BaseModel):
    """The participant's state after the change."""

    participant_id: str
    excluded: bool
    changed: bool = Field(..., description="false when they already were so")
    excluded_answers: int = Field(..., description="their answers the learners are no longer told (0 on include)")


class ParticipantQualityOut(BaseModel):
    """One participant's rater-quality measures and flags (docs/service.md, "Rater quality")."""

    participant_id: str
    answers: int
    skips: int
    median_response_seconds: float | None
    top_label: str | None
    top_label_share: float | None
    gold_answered: int
    gold_wrong: int
    consensus_items: int
    consensus_agreement: float | None
    chance_agreement: float | None
    flags: list[str]
    excluded: bool
    platform: str | None = None


class ParticipantsOut(BaseModel):
    """Participants with their quality flags: flagged first, then by answers."""

    experiment_id: int
    n_participants: int
    n_flagged: int
    n_excluded: int
    n_skips: int = Field(..., description="skips (can't decide) over every participant")
    participants: list[ParticipantQualityOut]


class OnDoneIn(BaseModel):
    """What happens when every learner of the experiment has stopped."""

    model_config = ConfigDict(extra="forbid")
    auto_stop: bool = Field(False, description="stop the experiment (no more queries) at that moment")
    webhook_url: str | None = Field(
        None, max_length=2000,
        description="an http(s) URL on a public address that gets one signed JSON POST at that moment (null: "
                    "none); a new URL is called once even if the previous one was")


class WebhookCall(BaseModel):
    """The one call of the owner's webhook."""

    called_at: float = Field(description="when the call was made, in Unix seconds")
    status: int | None = Field(description="the HTTP status it got, or null")
    error: str | None


class OnDoneOut(BaseModel):
    """What happens when every learner has stopped, and the webhook call once made."""

    auto_stop: bool
    webhook_url: str | None
    webhook: WebhookCall | None = Field(description="the call, once made")


class OnDoneSetOut(OnDoneOut):
    """The answer to setting what happens when every learner has stopped: with a new webhook URL, the secret
    that signs its calls, shown this once."""

    webhook_secret: str | None = Field(
        None, description="with a new webhook URL: the secret that keys the calls' X-Purebandits-Signature "
                          "(HMAC-SHA256), shown only in this answer; null otherwise")
