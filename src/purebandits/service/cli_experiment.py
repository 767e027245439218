"""``purebandits experiment``: manage experiments on a running server from the command line.

Every action but ``token`` is a client of the HTTP API (:class:`purebandits.service.client.ServiceClient`):
``create``, ``list``, ``show``, ``pause``, ``resume``, ``stop``, ``archive``, ``delete``, ``results``
and ``export``. ``token`` and ``verify`` work on the database directly (no HTTP): ``token`` issues a new
owner token for the person who runs the server and has lost the one printed at creation; ``verify``
replays experiments' event logs and checks their snapshots and verified checkpoints (``--full``: the
whole log, not only the events after the last checkpoint).

Server and token come from ``--server`` / ``--token`` or the environment (``PUREBANDITS_SERVER``,
default http://127.0.0.1:8000; ``PUREBANDITS_TOKEN``, or ``PUREBANDITS_TOKEN_FILE`` naming a file of mode
0600: an owner token, or the admin token; ``--token`` shows it to every user of the machine in ``ps``). A server
error prints ``error: <the server's message> (HTTP <status>)`` to stderr and exits with 1; a
malformed option (``--arm``, ``--param``, ``--labels``, an unreadable file) exits with 2.
"""

from __future__ import annotations

import argparse
import base64
import csv
import io
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from purebandits._extras import require_extra

__all__ = ["HELP", "add_arguments", "run", "parse_arm", "parse_param", "parse_labels", "image_payload",
           "DEFAULT_SERVER"]

HELP = ("manage experiments on a running server: create, list, show, pause/resume/stop, results, export, token, "
        "verify")

DEFAULT_SERVER = "http://127.0.0.1:8000"
#: the context image types the server accepts, and the largest image (decoded)
IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
               ".webp": "image/webp"}
MAX_IMAGE_BYTES = 2 * 1024 * 1024

ARM_SYNTAX = "LABEL:ALGORITHM[:SHARE][:KEY=VALUE,KEY=VALUE...]"


class UsageError(Exception):
    """A malformed option or an unreadable input file (exit code 2)."""


# ---------------------------------------------------------------------------- arguments
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Sub-commands of ``purebandits experiment`` and their options."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = ("Server and token: --server URL (env PUREBANDITS_SERVER, default " + DEFAULT_SERVER + "),\n"
                     "--token TOKEN (env PUREBANDITS_TOKEN): the experiment's owner token, or the admin token.\n"
                     "Run 'purebandits experiment ACTION --help' for an action's options.")
    _connection_options(parser, top=True)
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    def add(name: str, help_: str, *, eid: bool = True, json_out: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        if eid:
            p.add_argument("eid", type=int, metavar="EID", help="experiment id")
        _connection_options(p, top=False)
        if json_out:
            p.add_argument("--json", action="store_true", help="print the server's JSON response")
        return p

    p = add("create", "create an experiment from a CSV of items (prints how many items, its URLs and owner token)",
            eid=False)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = (
        "One learner: --algorithm NAME [--param KEY=VALUE ...]. Several learners side by side (each\n"
        "participant is assigned to one, by share, for good): repeat\n"
        f"  --arm {ARM_SYNTAX}\n"
        "LABEL may be empty (the learner's class name), SHARE defaults to 1 (shares are normalised),\n"
        "and the parameters are comma-separated; --param values apply to every arm (an arm's own win).\n"
        "Values parse as JSON when they can (numbers, true/false, null, lists), else as strings.\n"
        "Example: --arm LilUCB:lil_ucb:0.5:preset=heuristic --arm Uniform:uniform_allocation:0.5")
    p.add_argument("--items", required=True, metavar="CSV",
                   help="UTF-8 CSV file of the items ('-' for stdin): header 'text' (or 'caption'), optional 'id' "
                        "(or 'item_id', 'target_id') and 'image_url'; a published caption-contest summary as it is")
    p.add_argument("--skip-blank", action="store_true",
                   help="leave out rows whose text is blank (and say how many) instead of refusing the file")
    p.add_argument("--name", help="experiment name (default: the CSV file's name without extension)")
    p.add_argument("--image", metavar="FILE", help="context image shown above every item (PNG, JPEG, GIF or WebP, "
                                                   "at most 2 MB)")
    p.add_argument("--instructions", metavar="TEXT", help="plain text shown above the item on the rating page")
    learners = p.add_mutually_exclusive_group()
    learners.add_argument("--algorithm", metavar="NAME",
                          help="one learner: a registry name (see 'purebandits algorithms'; server default lil_ucb)")
    learners.add_argument("--arm", action="append", metavar="SPEC", default=None,
                          help=f"one of several learners: {ARM_SYNTAX} (repeat the option)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="learner parameter (repeatable); with --arm, for every arm")
    p.add_argument("--k", type=int, help="size of the top set (for every learner that takes k)")
    p.add_argument("--delta", type=float, help="error probability (for every learner that takes delta)")
    p.add_argument("--budget", type=int, help="fixed budget (for every learner that takes budget)")
    p.add_argument("--labels", metavar="NAME=REWARD,...",
                   help='answer labels and their rewards, e.g. "unfunny=0,somewhat funny=0.5,funny=1" (the default)')
    p.add_argument("--seed", type=int, help="learner seed (default: random)")
    p.add_argument("--repeats", choices=["never", "not_consecutive"],
                   help="never: a participant sees an item at most once while unseen items remain (server "
                        "default); not_consecutive: never the same item twice in a row")
    p.add_argument("--answers-per-participant", type=int, metavar="N",
                   help="after N answers a participant is done and gets a completion code")
    p.add_argument("--completion-url", metavar="URL",
                   help="where the page sends a participant with a completion code (Prolific's completion URL; "
                        "{code} becomes their code)")
    p.add_argument("--allow-skip", action="store_true", default=None,
                   help="show a skip (can't decide) button; skips are recorded, never told to a learner")
    p.add_argument("--gold", metavar="CSV",
                   help="gold items, a CSV file with columns label,text (and optionally id): known answers shown "
                        "at --gold-positions, never told to a learner")
    p.add_argument("--gold-positions", metavar="P,P,...",
                   help="the session positions of the gold items (1 = a participant's first item), e.g. 5,20")
    p.add_argument("--query-expiry", type=float, metavar="SECONDS",
                   help="unanswered queries expire after this many seconds (server default)")
    p.add_argument("--query", choices=["rating", "pairwise", "rating_then_pairwise"],
                   help="rating: one item per query, rated with the labels (server default); pairwise: two items "
                        "per query, answered left or right, ranked by Borda score (no --labels or --gold); "
                        "rating_then_pairwise: ratings until the top --top-m are found, then comparisons among them")
    p.add_argument("--top-m", type=int, metavar="M",
                   help="rating_then_pairwise: how many items stage 1 hands to the comparisons (2 <= M < items)")
    p.add_argument("--ratings-budget", type=int, metavar="N",
                   help="rating_then_pairwise: stage 1 ends after N ratings even if its learner has not proven "
                        "the top M (they go on unproven)")

    add("list", "list every experiment (needs the admin token when the server has one)", eid=False)
    add("show", "an experiment's settings, status and learners")
    for name, help_ in (("pause", "stop handing out queries for now (answers to issued queries still count)"),
                        ("resume", "hand out queries again after a pause"),
                        ("stop", "end the experiment for good (it cannot be resumed)"),
                        ("archive", "make the experiment read-only and hide it from the home page (final)")):
        add(name, help_)
    p = add("delete", "delete the experiment and every answer of it (asks for confirmation)")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")

    p = add("results", "one learner's ranking: rank, item, mean, interval, count, and its stopping progress")
    p.add_argument("--algorithm", metavar="LABEL", help="the learner's label (default: the first learner)")
    p.add_argument("--top", type=int, default=20, metavar="N", help="show the N best items (default 20; 0: all)")

    p = add("export", "download a CSV: every answer, the per-item summary, the participants or the results over time",
            json_out=False)
    p.add_argument("--what", choices=["answers", "summary", "participants", "history"], default="answers",
                   help="which CSV (default answers)")
    p.add_argument("--algorithm", metavar="LABEL",
                   help="only this learner (summary: that learner's summary; answers, participants, history: its rows)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="where to write ('-': stdout; default: the file name the server suggests)")

    p = sub.add_parser("token", help="issue a new owner token from the database (local, no HTTP; the old one stops "
                                     "working)",
                       description="Issue a new owner token for experiment EID straight from the service's "
                                   "database and print it; the previous token stops working. Run it where "
                                   "the server runs, with the same --db.")
    p.add_argument("eid", type=int, metavar="EID", help="experiment id")
    p.add_argument("--db", metavar="URL", default=None,
                   help="SQLAlchemy URL, as for 'purebandits serve --db' (env PUREBANDITS_DATABASE_URL; "
                        "default: sqlite file purebandits.sqlite in the working directory)")

    p = sub.add_parser("verify", help="replay event logs and check snapshots and checkpoints (local, no HTTP)",
                       description="Replay the event log of experiment EID (default: every experiment) from the "
                                   "database, compare it with the stored snapshot, and store the replayed state as "
                                   "snapshot and verified checkpoint (a wrong one is replaced, with a warning). "
                                   "By default from each learner's verified checkpoint, as a server start does; "
                                   "--full replays every log from its start (as long as the log). Safe while the "
                                   "server runs. Exits with 1 if a snapshot or checkpoint was wrong.")
    p.add_argument("eid", type=int, metavar="EID", nargs="?", default=None, help="experiment id (default: all)")
    p.add_argument("--full", action="store_true", help="replay each log from its start, ignoring the checkpoints")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--db", metavar="URL", default=None,
                   help="SQLAlchemy URL, as for 'purebandits serve --db' (env PUREBANDITS_DATABASE_URL; "
                        "default: sqlite file purebandits.sqlite in the working directory)")


def _connection_options(parser: argparse.ArgumentParser, top: bool) -> None:
    # given before the action (top) or after it; after wins. SUPPRESS keeps the sub-parser from
    # overwriting a value given before the action with its default.
    default = None if top else argparse.SUPPRESS
    parser.add_argument("--server", metavar="URL", default=default,
                        help=f"the server's base URL (env PUREBANDITS_SERVER, default {DEFAULT_SERVER})")
    parser.add_argument("--token", metavar="TOKEN", default=default,
                        help="owner token of the experiment, or the admin token (env PUREBANDITS_TOKEN, or "
                             "PUREBANDITS_TOKEN_FILE naming a file of mode 0600: a command line is visible in ps)")


# ---------------------------------------------------------------------------- option parsing
def parse_value(text: str) -> Any:
    """A parameter value: JSON when it parses (numbers, booleans, null, lists, objects), else the string itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_param(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` -> (key, value parsed by :func:`parse_value`)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise UsageError(f"parameter {text!r} is not KEY=VALUE")
    return key, parse_value(value.strip())


def _split_params(text: str) -> dict[str, Any]:
    """``k=v,k=v`` -> dict; a comma inside a value (``ns=[1,2]``) stays in it: pieces without '=' join the previous."""
    pieces: list[str] = []
    for piece in text.split(","):
        if pieces and "=" not in piece:
            pieces[-1] += "," + piece
        else:
            pieces.append(piece)
    return dict(parse_param(p) for p in pieces if p.strip())


def parse_arm(text: str) -> dict[str, Any]:
    """``LABEL:ALGORITHM[:SHARE][:KEY=VALUE,...]`` -> ``{"label", "algorithm", "share", "params"}`` (keys left out
    when not given: an empty LABEL is the learner's class name, SHARE defaults to 1 on the server)."""
    label, sep, rest = text.partition(":")
    algorithm, _, rest = rest.partition(":")
    label, algorithm = label.strip(), algorithm.strip()
    if not sep or not algorithm:
        raise UsageError(f"--arm {text!r}: expected {ARM_SYNTAX}")
    arm: dict[str, Any] = {}
    if label:
        arm["label"] = label
    arm["algorithm"] = algorithm
    if rest:
        first, _, tail = rest.partition(":")
        if "=" not in first:
            try:
                arm["share"] = float(first)
            except ValueError:
                raise UsageError(f"--arm {text!r}: share {first!r} is not a number (expected {ARM_SYNTAX})") from None
            rest = tail
        if rest:
            try:
                arm["params"] = _split_params(rest)
            except UsageError as exc:
                raise UsageError(f"--arm {text!r}: {exc}") from None
    return arm


def parse_labels(text: str) -> list[dict[str, Any]]:
    """``"unfunny=0,somewhat funny=0.5,funny=1"`` -> ``[{"name", "reward"}, ...]`` (a name may hold '=', the
    reward follows the last one)."""
    out = []
    for piece in text.split(","):
        if not piece.strip():
            continue
        name, sep, reward = piece.rpartition("=")
        name = name.strip()
        if not sep or not name:
            raise UsageError(f"--labels: {piece.strip()!r} is not NAME=REWARD")
        try:
            value = float(reward)
        except ValueError:
            raise UsageError(f"--labels: the reward of {name!r} is not a number: {reward.strip()!r}") from None
        out.append({"name": name, "reward": value})
    if not out:
        raise UsageError("--labels: no label given")
    return out


def image_payload(path: str | Path) -> dict[str, str]:
    """``{"content_type", "data"}`` (base64) for the context image at ``path``; the type comes from the file's magic
    bytes, else its extension."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read image {str(path)!r}: {exc.strerror or exc}") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise UsageError(f"image {str(path)!r} is {len(data)} bytes; the server takes at most {MAX_IMAGE_BYTES}")
    ctype = _sniff_image(data) or IMAGE_TYPES.get(path.suffix.lower())
    if ctype is None:
        raise UsageError(f"image {str(path)!r}: not a PNG, JPEG, GIF or WebP file")
    return {"content_type": ctype, "data": base64.b64encode(data).decode("ascii")}


def _sniff_image(data: bytes) -> str | None:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _read_items(path: str) -> tuple[bytes, str]:
    """(bytes, default name) of ``--items`` ('-' reads stdin), refused unless UTF-8 (a byte-order mark is fine) with
    the words the server uses for a file that is not (the line and byte where it stops being UTF-8)."""
    from purebandits.service.errors import BadRequest
    from purebandits.service.validation import decode_items_csv

    if path == "-":
        data, name, shown = sys.stdin.buffer.read(), "experiment", "the items file (stdin)"
    else:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise UsageError(f"cannot read items file {path!r}: {exc.strerror or exc}") from None
        name, shown = Path(path).stem, f"the items file {path!r}"
    try:
        decode_items_csv(data, shown)
    except BadRequest as exc:
        raise UsageError(exc.message) from None
    return data, name


def build_spec(args: argparse.Namespace) -> dict[str, Any]:
    """The ``POST /api/experiments`` body for ``create``'s options (only the fields given)."""
    data, default_name = _read_items(args.items)
    # the file's bytes, as the /new form sends them: the server reads them as it reads the form's
    spec: dict[str, Any] = {"name": args.name or default_name,
                            "items_csv_base64": base64.b64encode(data).decode("ascii")}
    if args.skip_blank:
        spec["skip_blank"] = True
    common = dict(parse_param(p) for p in args.param)
    if args.arm:
        arms = [parse_arm(a) for a in args.arm]
        for arm in arms:
            if common:
                arm["params"] = {**common, **arm.get("params", {})}
        spec["algorithms"] = arms
    else:
        if args.algorithm:
            spec["algorithm"] = args.algorithm
        if common:
            spec["params"] = common
    if args.labels is not None:
        spec["labels"] = parse_labels(args.labels)
    if args.image:
        spec["image"] = image_payload(args.image)
    for key, value in (("instructions", args.instructions), ("k", args.k), ("delta", args.delta),
                       ("budget", args.budget), ("seed", args.seed), ("repeats", args.repeats),
                       ("answers_per_participant", args.answers_per_participant),
                       ("query_expiry_seconds", args.query_expiry), ("completion_url", args.completion_url),
                       ("allow_skip", args.allow_skip), ("query", args.query)):
        if value is not None:
            spec[key] = value
    spec.update(_stage_options(args))
    if args.gold is not None:
        spec["gold"] = read_gold_csv(args.gold)
    if args.gold_positions is not None:
        try:
            spec["gold_positions"] = [int(p) for p in args.gold_positions.split(",") if p.strip()]
        except ValueError:
            raise UsageError(f"--gold-positions must be integers separated by commas, got {args.gold_positions!r}") \
                from None
    return spec


def _stage_options(args: argparse.Namespace) -> dict[str, Any]:
    """``top_m`` and ``ratings_budget`` of ``--query rating_then_pairwise``, checked before any request with the
    server's own 422 wording where it has one (the range of --top-m against the item count is the server's)."""
    top_m, budget = args.top_m, args.ratings_budget
    if args.query != "rating_then_pairwise":
        if top_m is not None or budget is not None:
            raise UsageError("--top-m and --ratings-budget are for --query rating_then_pairwise only")
        return {}
    if top_m is None:
        raise UsageError("ratings then comparisons needs top_m (--top-m): how many items stage 1 hands to the "
                         "comparisons")
    if top_m < 2:
        raise UsageError(f"top_m (--top-m) must be an integer of at least 2, got {top_m}")
    if budget is not None and budget < 1:
        raise UsageError(f"ratings_budget (--ratings-budget) must be an integer of at least 1, got {budget}")
    if args.k is not None and not 1 <= args.k < top_m:
        raise UsageError(f"k (what stage 2 finds among the top_m) must be an integer in [1, top_m - 1 = "
                         f"{top_m - 1}], got {args.k}")
    if args.arm:
        raise UsageError("ratings then comparisons runs one learner per stage: give --algorithm / --param for "
                         "stage 1, not --arm")
    if args.budget is not None:
        raise UsageError("ratings then comparisons: 'budget' is not taken; 'ratings_budget' (--ratings-budget) "
                         "ends stage 1")
    if args.gold is not None:
        raise UsageError("ratings then comparisons takes no gold items")
    return {"top_m": top_m} | ({"ratings_budget": budget} if budget is not None else {})


def read_gold_csv(path: str) -> list[dict[str, str]]:
    """Gold items from a CSV file with a header naming ``label`` and ``text`` (and optionally ``id``)."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.DictReader(f))
    except OSError as exc:
        raise UsageError(f"--gold: cannot read {path}: {exc.strerror}") from None
    if not rows or not {"label", "text"} <= set(rows[0]):
        raise UsageError(f"--gold: {path} needs a header with the columns label and text (and optionally id)")
    return [{k: v for k, v in {"id": r.get("id"), "label": r["label"], "text": r["text"]}.items() if v}
            for r in rows]


# ---------------------------------------------------------------------------- running
def _given_token(args: argparse.Namespace) -> str | None:
    """``--token``, else ``PUREBANDITS_TOKEN``, else the file named by ``PUREBANDITS_TOKEN_FILE`` (mode 0600)."""
    from purebandits.service.settings import read_secret_file

    if args.token:
        return str(args.token)
    if os.environ.get("PUREBANDITS_TOKEN"):
        return os.environ["PUREBANDITS_TOKEN"]
    if os.environ.get("PUREBANDITS_TOKEN_FILE"):
        try:
            return read_secret_file(os.environ["PUREBANDITS_TOKEN_FILE"], "PUREBANDITS_TOKEN_FILE")
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return None


def run(args: argparse.Namespace) -> int:
    """Run one action; 0 on success, 1 on a server or connection error, 2 on a malformed option."""
    from purebandits.service.client import ApiError, ClientError, ServiceClient

    try:
        if args.action == "token":
            return _token(args)
        if args.action == "verify":
            return _verify(args)
        server = args.server or os.environ.get("PUREBANDITS_SERVER") or DEFAULT_SERVER
        api = ServiceClient(server, _given_token(args))
        return ACTIONS[args.action](api, args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ApiError as exc:
        print(f"error: {exc}", file=sys.stderr)
        if args.action == "create" and "skip_blank" in exc.detail:
            print("hint: --skip-blank leaves the rows with a blank text out (and says how many)", file=sys.stderr)
        if exc.status == 401 and not _given_token(args):
            print("hint: no token given: set PUREBANDITS_TOKEN or PUREBANDITS_TOKEN_FILE, or pass --token",
                  file=sys.stderr)
        return 1
    except ClientError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False))


def _create(api: Any, args: argparse.Namespace) -> int:
    spec = build_spec(args)
    out = api.create_experiment(spec)
    for key in ("participant_url", "dashboard_url"):  # root-relative when the server has no public_url
        if isinstance(out.get(key), str) and out[key].startswith("/"):
            out[key] = getattr(api, "base_url", "") + out[key]
    if args.json:
        _print_json(out)
    else:
        print(f"created experiment {out['id']}: {spec['name']}{_items_created(out)}")
        print(f"  participant URL: {out['participant_url']}")
        print(f"  dashboard URL:   {out['dashboard_url']}")
        print(f"  owner token:     {out['owner_token']}")
    sys.stdout.flush()
    print("warning: the owner token is shown only this once; keep it (e.g. export PUREBANDITS_TOKEN=...). "
          f"If it is lost, 'purebandits experiment token {out['id']} --db URL' on the server's machine issues "
          "a new one.", file=sys.stderr)
    return 0


def _items_created(out: dict[str, Any]) -> str:
    """`` (3,659 items; 1 blank caption left out: line 7)`` from a create's response ("" from a server that does
    not say)."""
    if not isinstance(out.get("n_items"), int):
        return ""
    text = f"{out['n_items']:,} items"
    skipped, lines = out.get("skipped_blank") or 0, out.get("skipped_blank_lines") or []
    if skipped:
        more = ", ..." if len(lines) < skipped else ""
        text += (f"; {skipped:,} blank caption{'s' if skipped != 1 else ''} left out: "
                 f"line{'s' if skipped != 1 else ''} {', '.join(map(str, lines))}{more}")
    return f" ({text})"


def _list(api: Any, args: argparse.Namespace) -> int:
    exps = api.list_experiments()
    if args.json:
        _print_json({"experiments": exps})
        return 0
    if not exps:
        print("no experiments")
        return 0
    rows = [[str(e["id"]), e.get("status", ""), str(e.get("n_items", "")), str(e.get("n_answers", "")),
             ",".join(e.get("algorithms") or []), _when(e.get("created_at")), e.get("name", "")] for e in exps]
    _table(["ID", "STATUS", "ITEMS", "ANSWERS", "LEARNERS", "CREATED", "NAME"], rows, right={0, 2, 3})
    return 0


def _show(api: Any, args: argparse.Namespace) -> int:
    info = api.experiment(args.eid)
    if args.json:
        _print_json(info)
        return 0
    labels = ", ".join(f"{lab['name']}={_num(lab.get('reward'))}" for lab in info.get("labels") or [])
    app = info.get("answers_per_participant")
    lines = [("status", info.get("status")), ("query", info.get("query", "rating")),
             ("created", _when(info.get("created_at"))),
             ("items", info.get("n_items")), ("labels", labels), ("k", info.get("k")),
             ("version", f"{info.get('version')} events"),
             ("query expiry", f"{_num(info.get('query_expiry_seconds'))} s")]
    if "repeats" in info:
        lines.append(("repeats", info["repeats"]))
    if "answers_per_participant" in info:
        lines.append(("answers per participant", "unlimited" if app is None else app))
    if "has_image" in info:
        lines.append(("context image", "yes" if info["has_image"] else "no"))
    if "instructions" in info:
        lines.append(("instructions", _clip(info["instructions"], 100) if info["instructions"] else "-"))
    print(f"experiment {info['id']}: {info.get('name', '')}")
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        print(f"  {key + ':':<{width + 1}} {value}")
    learners = info.get("algorithms")
    if not learners:  # a server without several learners: the one learner of the experiment
        learners = [{"label": info.get("algorithm"), "algorithm": info.get("algorithm"), "share": 1.0,
                     "seed": info.get("seed"), "params": info.get("params") or {}}]
    print("  learners:")
    rows = []
    for lr in learners:
        done = lr.get("done")
        stopped = lr.get("stopped_at_answers")
        rows.append([str(lr.get("label")), str(lr.get("algorithm")), _num(lr.get("share")),
                     "-" if done is None else ("yes" + (f" ({stopped} answers)" if stopped is not None else "")
                                               if done else "no"),
                     str(lr.get("seed", "")), json.dumps(lr.get("params") or {}, ensure_ascii=False)])
    _table(["LABEL", "ALGORITHM", "SHARE", "DONE", "SEED", "PARAMS"], rows, indent="    ")
    if info.get("stages"):
        _show_stages(info["stages"])
    return 0


def _show_stages(st: dict[str, Any]) -> None:
    """A staged experiment's ``stages`` block in words: which stage runs, stage 1's top m and whether it was
    proven, stage 2's experiment and recommendation, the winner; a stage 2 says whose stage it is."""
    if st.get("stage_of") is not None:
        print(f"  stages: this is stage 2 (the comparisons) of experiment {st['stage_of']}")
        return
    s1, s2 = st.get("stage1") or {}, st.get("stage2")
    budget = st.get("ratings_budget")
    lines = [("stage", "2 of 2 (comparisons)" if st.get("stage") == 2 else "1 of 2 (ratings)"),
             ("top m", f"{st.get('top_m')}" + (f" (ratings budget {budget:,})" if budget else " (no ratings budget)")),
             ("delta", f"{_num(st.get('delta'))} ({_num(st.get('stage_delta'))} per stage)")]
    top = ", ".join(map(str, s1.get("top_m") or []))
    if st.get("stage") == 1:
        lines.append(("stage 1", f"running, {s1.get('answers', 0):,} ratings; current top m (not final): {top}"))
    elif s1.get("proven"):
        lines.append(("stage 1", f"proven (its learner stopped) after {s1.get('answers', 0):,} ratings: {top}"))
    else:
        lines.append(("stage 1", f"not proven: taken at the ratings budget after {s1.get('answers', 0):,} "
                                 f"ratings: {top}"))
    if s2:
        rec = ", ".join(map(str, s2.get("recommendation") or []))
        lines.append(("stage 2", f"experiment {s2.get('experiment_id')}, {s2.get('answers', 0):,} comparisons, "
                                 f"{'stopped' if s2.get('done') else 'running'}; recommendation: {rec or '-'}"))
    winner = st.get("winner")
    if winner is not None:
        text = ", ".join(winner) if isinstance(winner, list) else str(winner)
        lines.append(("winner", text + ("" if st.get("proven") else " (among an unproven top m)")))
    print("  stages:")
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        print(f"    {key + ':':<{width + 1}} {value}")


def _set_status(api: Any, args: argparse.Namespace) -> int:
    out = api.set_status(args.eid, args.action)
    if args.json:
        _print_json(out)
    else:
        print(f"experiment {out.get('id', args.eid)}: {out.get('status')}")
    return 0


def _delete(api: Any, args: argparse.Namespace) -> int:
    if not args.yes:
        if not _isatty(sys.stdin):
            raise UsageError(f"not deleting experiment {args.eid} without confirmation: stdin is not a terminal, "
                             "pass --yes")
        info = api.experiment(args.eid)
        prompt = (f"Delete experiment {args.eid} ({info.get('name', '')!r}, {info.get('status')}, "
                  f"version {info.get('version')}) and every answer of it? This cannot be undone. [y/N] ")
        try:
            reply = input(prompt)
        except EOFError:
            reply = ""
        if reply.strip().lower() not in ("y", "yes"):
            print("not deleted", file=sys.stderr)
            return 1
    out = api.delete_experiment(args.eid)
    if args.json:
        _print_json(out)
    else:
        print(f"experiment {out.get('id', args.eid)}: deleted")
    return 0


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _results(api: Any, args: argparse.Namespace) -> int:
    res = api.results(args.eid, algorithm=args.algorithm)
    if args.json:
        _print_json(res)
        return 0
    label = res.get("algorithm_label") or res.get("algorithm")
    others = res.get("algorithms") or []
    print(f"experiment {res.get('experiment_id', args.eid)}: {res.get('name', '')}  [{res.get('status')}]")
    learner = f"learner {label} ({res.get('algorithm')}, {json.dumps(res.get('params') or {}, ensure_ascii=False)})"
    if len(others) > 1:
        learner += f"; learners: {', '.join(others)} (--algorithm LABEL)"
    print(learner)
    print(f"answers: {res.get('n_answers')} (told the learner: {res.get('n_told')}, pending: {res.get('n_pending')})")
    print(_stopping_line(res))
    rec = res.get("recommendation") or []
    print("recommended: " + (", ".join(str(r.get("id")) for r in rec) or "-"))
    ranking = res.get("ranking") or []
    shown = ranking if args.top <= 0 else ranking[:args.top]
    rows = []
    for r in shown:
        rows.append([f"{r['rank']}{'*' if r.get('recommended') else ''}", str(r.get("id")), _fmt(r.get("mean")),
                     f"[{_fmt(r.get('lower'), '-inf')}, {_fmt(r.get('upper'), 'inf')}]", str(r.get("count")),
                     _clip(r.get("text") or "", 60)])
    print()
    _table(["RANK", "ITEM", "MEAN", "INTERVAL", "COUNT", "TEXT"], rows, right={0, 2, 4})
    if len(shown) < len(ranking):
        print(f"... {len(ranking) - len(shown)} more (--top 0 shows all); * = recommended")
    else:
        print("* = recommended")
    return 0


def _stopping_line(res: dict[str, Any]) -> str:
    st = res.get("stopping") or {}
    done = bool(res.get("done", st.get("done")))
    frac = st.get("fraction")
    line = f"stopping: {100 * frac:.0f}%" if isinstance(frac, int | float) else "stopping: ?"
    if done:
        line += " - done: the learner's stopping rule fired (or its budget is spent)"
    elif st.get("reason"):
        line += f" - {st['reason']}"
    elif st.get("budget"):
        line += f" - {st.get('n_pulls')} of a budget of {st['budget']} answers"
    else:
        parts = []
        if st.get("separated") is not None and st.get("of"):
            parts.append(f"{st['separated']} of {st['of']} decided")
        if st.get("margin") is not None:
            parts.append(f"margin {_fmt(st['margin'], '-inf')}")
        line += " - " + "; ".join([*parts, "not done"])
        if st.get("description"):
            line += f"\n  rule: {st['description']}"
    forecast = st.get("forecast")
    if not done and isinstance(forecast, dict) and isinstance(forecast.get("mid"), int):
        line += (f"\n  forecast: about {forecast['mid']:,} more answers (range {forecast['low']:,}-"
                 f"{forecast['high']:,}) if the current estimates hold")
    elif not done and st.get("forecast_reason"):
        line += f"\n  forecast: none ({st['forecast_reason']})"
    if st.get("delta_note"):
        line += f"\n  error probability: {st['delta_note']}"
    return line


def _export(api: Any, args: argparse.Namespace) -> int:
    from purebandits.service.client import ClientError

    resp = api.export(args.eid, args.what, algorithm=args.algorithm if args.what in ("summary", "history") else None)
    body = resp.body
    text = body.decode("utf-8")
    if args.algorithm and args.what != "summary":
        rows = list(csv.reader(io.StringIO(text)))
        if not rows or "algorithm" not in rows[0]:
            raise ClientError(f"the server's {args.what}.csv has no 'algorithm' column; cannot keep only "
                              f"{args.algorithm!r}")
        col = rows[0].index("algorithm")
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerows([rows[0]] + [r for r in rows[1:] if r[col] == args.algorithm])
        text = buf.getvalue()
    n_rows = max(0, sum(1 for _ in csv.reader(io.StringIO(text))) - 1)
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    out = Path(args.output or resp.filename or f"experiment-{args.eid}-{args.what}.csv")
    if args.algorithm and args.what != "summary" and not args.output:
        out = out.with_name(f"{out.stem}_{args.algorithm}{out.suffix}")
    try:
        out.write_text(text, encoding="utf-8", newline="")
    except OSError as exc:
        raise UsageError(f"cannot write {str(out)!r}: {exc.strerror or exc}") from None
    print(f"wrote {out} ({n_rows} row{'s' if n_rows != 1 else ''})")
    return 0


def _open_db(db: str | None) -> tuple[Any, Any, str] | None:
    """(engine, settings, URL as shown) of the service's database from ``--db`` / the environment; None (after an
    error message) if a SQLite file is not there."""
    from sqlalchemy.engine import make_url

    from purebandits.service.settings import Settings
    from purebandits.service.storage import make_engine

    try:
        settings = Settings.from_env(database_url=db)
    except ValueError as exc:  # PUREBANDITS_DATABASE_URL_FILE that others may read, a setting that does not parse
        raise UsageError(str(exc)) from None
    url = settings.url
    try:
        parsed = make_url(url)
    except Exception:  # sqlalchemy.exc.ArgumentError: not a URL
        raise UsageError(f"--db {url!r} is not a database URL (e.g. sqlite:///path or postgresql://...)") from None
    shown = parsed.render_as_string(hide_password=True)
    if parsed.get_backend_name() == "sqlite":
        path = parsed.database
        if path and path != ":memory:" and not path.startswith("file:") and not Path(path).is_file():
            print(f"error: no database at {path} (run in the server's working directory, or pass --db URL as given "
                  "to 'purebandits serve --db')", file=sys.stderr)
            return None
    return make_engine(url), settings, shown


def _token(args: argparse.Namespace) -> int:
    """``token EID``: a new owner token straight from the database (no HTTP)."""
    require_extra("service", "purebandits experiment token")  # it opens the database itself
    import sqlalchemy as sa

    from purebandits.service.errors import ServiceError
    from purebandits.service.models import experiments
    from purebandits.service.study import Study

    opened = _open_db(args.db)
    if opened is None:
        return 1
    engine, settings, shown = opened
    try:
        try:
            with engine.connect() as conn:
                row = conn.execute(sa.select(experiments.c.id, experiments.c.name)
                                   .where(experiments.c.id == args.eid)).first()
        except sa.exc.SQLAlchemyError as exc:
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            print(f"error: cannot read experiments from {shown}: {reason}", file=sys.stderr)
            return 1
        if row is None:
            print(f"error: experiment {args.eid} does not exist in {shown}", file=sys.stderr)
            return 1
        try:
            token = Study(engine, settings).rotate_token(args.eid)
        except ServiceError as exc:
            print(f"error: {exc.message}", file=sys.stderr)
            return 1
    finally:
        engine.dispose()
    print(f"new owner token for experiment {args.eid} ({row.name}): {token}")
    sys.stdout.flush()
    print("note: the previous owner token no longer works; this one is shown only once", file=sys.stderr)
    return 0


def _verify(args: argparse.Namespace) -> int:
    """``verify [EID] [--full]``: replay event logs and check snapshots and checkpoints (no HTTP)."""
    require_extra("service", "purebandits experiment verify")  # it opens the database itself
    import sqlalchemy as sa

    from purebandits.service.errors import ServiceError
    from purebandits.service.storage import current_revision, head_revision
    from purebandits.service.study import Study

    opened = _open_db(args.db)
    if opened is None:
        return 1
    engine, settings, shown = opened
    try:
        try:
            if current_revision(engine) != head_revision(engine):
                print(f"error: the database {shown} is not at the code's schema revision: run 'purebandits serve "
                      "--upgrade-only' first", file=sys.stderr)
                return 1
            study = Study(engine, settings)
            started = time.perf_counter()
            report = study.verify_all(full=args.full) if args.eid is None else \
                {args.eid: study.verify(args.eid, full=args.full)}
            seconds = time.perf_counter() - started
        except ServiceError as exc:
            print(f"error: {exc.message}", file=sys.stderr)
            return 1
        except sa.exc.SQLAlchemyError as exc:
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            print(f"error: cannot verify {shown}: {reason}", file=sys.stderr)
            return 1
    finally:
        engine.dispose()
    wrong = [eid for eid, r in report.items() if r["snapshot_matches"] is False
             or any(x["checkpoint"] in ("corrupt", "unusable") for x in r["learners"])]
    if args.json:
        _print_json({str(eid): r for eid, r in report.items()})
    else:
        rows = [[str(eid), x["label"], str(x["version"]), _fmt(x["snapshot_version"]),
                 {True: "matches", False: "DIFFERED (replaced)", None: "-"}[x["snapshot_matches"]],
                 x["checkpoint"], "whole log" if x["full_replay"] else f"from {x['replayed_from']}", str(x["replayed"])]
                for eid, r in report.items() for x in r["learners"]]
        _table(["experiment", "learner", "version", "snapshot", "snapshot check", "checkpoint", "replay",
                "events replayed"], rows, right={0, 2, 3, 7})
        print(f"{len(report)} experiment(s) verified in {seconds:.1f} s"
              + (f"; wrong snapshots or checkpoints replaced in {wrong}" if wrong else ""))
    return 1 if wrong else 0


ACTIONS = {"create": _create, "list": _list, "show": _show, "pause": _set_status, "resume": _set_status,
           "stop": _set_status, "archive": _set_status, "delete": _delete, "results": _results, "export": _export}


# ---------------------------------------------------------------------------- formatting
def _table(header: list[str], rows: list[list[str]], right: set[int] | None = None, indent: str = "") -> None:
    right = right or set()
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=False)]
    for row in [header, *rows]:
        cells = [str(c).rjust(w) if i in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(row, widths,
                                                                                                  strict=False))]
        print((indent + "  ".join(cells)).rstrip())


def _fmt(x: Any, none: str = "-") -> str:
    return none if x is None else f"{x:.3f}" if isinstance(x, int | float) else str(x)


def _num(x: Any) -> str:
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return "-" if x is None else str(x)


def _clip(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n - 1] + "…"


def _when(t: Any) -> str:
    if not isinstance(t, int | float):
        return ""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))
