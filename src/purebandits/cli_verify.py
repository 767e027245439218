"""``purebandits verify EXPORT.csv``: check from an answers export alone whether a recommendation holds.

Reads the service's ``answers.csv`` (``purebandits experiment export``, ``GET /api/experiments/{eid}/answers.csv``:
one row per answer with its ``algorithm`` (learner), ``arm``, ``item_id`` and ``reward``), counts each item's
answers per reward value (every learner pooled unless ``--learner``) and prints the certificate of
:func:`purebandits.certificate.certify`. The export carries neither the error probability nor k, so ``--delta`` is
required and ``--k`` defaults to 1. Items nobody answered are not in the export: ``--n-items`` gives the
experiment's number of items (the threshold's union bound counts them, and an item without answers cannot be
defeated). Exit code 0 when the certificate holds, 1 when it does not, 2 on bad input.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from purebandits.certificate import Certificate

HELP = "check from an answers export whether the recommendation holds at error probability delta (a certificate)"

#: columns of the answers export this command reads
NEEDED_COLUMNS = ("algorithm", "arm", "item_id", "reward")
#: rival rows printed in the text output (the weakest); ``--json`` has every one
SHOWN_RIVALS = 10
#: what the service's CSV exports put before a cell a spreadsheet would run as a formula
_NEUTRALIZED = ("'=", "'+", "'-", "'@", "'\t", "'\r")


class ExportError(ValueError):
    """The export cannot be read as an answers export (exit code 2)."""


@dataclass(frozen=True)
class ExportCounts:
    """Per-item answer counts of an answers export: ``counts[arm, j]`` answers with reward ``values[j]``."""

    counts: list[list[int]]
    values: list[float]
    item_ids: list[str]
    learners: list[str]
    n_rows: int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``purebandits verify``."""
    parser.add_argument("export", metavar="EXPORT.csv", help="the experiment's answers export ('-': stdin)")
    parser.add_argument("--delta", type=float, metavar="D",
                        help="error probability to certify at (required: the export does not record it)")
    parser.add_argument("--k", type=int, default=1, metavar="K", help="size of the recommended top set (default 1)")
    parser.add_argument("--recommend", nargs="+", metavar="ITEM",
                        help="the recommended item ids (default: the empirical top k)")
    parser.add_argument("--learner", metavar="NAME",
                        help="only this learner's answers (the export's 'algorithm' column; default: all pooled)")
    parser.add_argument("--n-items", type=int, metavar="N",
                        help="the experiment's number of items, counting those nobody answered (default: the "
                             "largest arm in the export + 1)")
    parser.add_argument("--threshold", default="kinf-kt-pairs", metavar="NAME",
                        help="a threshold proven for the K_inf GLR statistic: kinf-kt-pairs (default: each pair its "
                             "own, the one the learners' K_inf stop uses), kinf-kt or kinf-portfolio")
    parser.add_argument("--json", action="store_true", help="print the certificate as JSON, every rival included")


def _item_id(cell: str) -> str:
    """An item id as the organizer wrote it: the export's leading ``'`` before a formula character removed."""
    return cell[1:] if cell.startswith(_NEUTRALIZED) else cell


def read_answers_export(path: str, learner: str | None = None, n_items: int | None = None) -> ExportCounts:
    """Count the answers of an answers export (``learner``'s only, if given); ExportError if it is not one."""
    try:
        handle = sys.stdin if path == "-" else Path(path).open(encoding="utf-8", newline="")
    except OSError as exc:
        raise ExportError(f"cannot read {path!r}: {exc.strerror or exc}") from None
    with handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise ExportError(f"{path!r} is empty")
        missing = [c for c in NEEDED_COLUMNS if c not in header]
        if missing:
            raise ExportError(f"{path!r} is not an answers export: no column {', '.join(missing)} (download it with "
                              "'purebandits experiment export EID --what answers')")
        col = {c: header.index(c) for c in NEEDED_COLUMNS}
        per_arm: dict[int, dict[float, int]] = {}
        ids: dict[int, str] = {}
        learners: set[str] = set()
        n_rows = 0
        for line, row in enumerate(reader, start=2):
            if not row:
                continue
            try:
                who, arm, reward = row[col["algorithm"]], int(row[col["arm"]]), float(row[col["reward"]])
                item = _item_id(row[col["item_id"]])
            except (IndexError, ValueError):
                raise ExportError(f"{path!r} line {line}: not an answer row (arm an integer, reward a number)") \
                    from None
            if arm < 0 or not 0.0 <= reward <= 1.0:
                raise ExportError(f"{path!r} line {line}: arm must be >= 0 and the reward in [0, 1] (the proven "
                                  f"thresholds need rewards in [0, 1]), got arm {arm}, reward {reward}")
            learners.add(who)
            if learner is not None and who != learner:
                continue
            cell = per_arm.setdefault(arm, {})
            cell[reward] = cell.get(reward, 0) + 1
            ids[arm] = item
            n_rows += 1
    if learner is not None and n_rows == 0:
        raise ExportError(f"no answers of learner {learner!r} in {path!r}; its learners: {sorted(learners)}")
    if n_rows == 0:
        raise ExportError(f"{path!r} has no answers")
    n = max(per_arm) + 1
    if n_items is not None:
        if n_items < n:
            raise ExportError(f"--n-items {n_items} is less than the items in the export (arm {n - 1} answered)")
        n = n_items
    values = sorted({r for cell in per_arm.values() for r in cell})
    col_of = {r: j for j, r in enumerate(values)}
    counts = [[0] * len(values) for _ in range(n)]
    for arm, cell in per_arm.items():
        for r, c in cell.items():
            counts[arm][col_of[r]] = c
    return ExportCounts(counts=counts, values=values, item_ids=[ids.get(i, f"(arm {i})") for i in range(n)],
                        learners=sorted(learners), n_rows=n_rows)


def _num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def format_certificate(cert: Certificate, source: str, shown: int = SHOWN_RIVALS) -> str:
    """The certificate as text: verdict, recommendation, threshold, the ``shown`` weakest rivals, explanation."""
    lines = [f"certificate for {source}: {'HOLDS' if cert.holds else 'DOES NOT HOLD'}"]
    means = {r.item: (r.mean_item, r.n_item) for r in cert.rivals}
    rec = ", ".join(f"{name!r} (mean {_num(means[i][0])}, {means[i][1]:,} answers)"
                    for i, name in zip(cert.recommendation, cert.recommendation_names, strict=True))
    lines.append(f"  recommendation: {rec}")
    lines.append(f"  {cert.t:,} answers on {cert.n_items:,} items; k = {cert.k}; delta = {cert.delta:g}")
    lines.append(f"  threshold {cert.threshold}: beta = {cert.beta:.3f} for the weakest rival (proven for the "
                 f"{cert.statistic} statistic on rewards in [0, 1], any sampling rule, any stopping time)")
    lines.append(f"  weakest rival: Z_ab = {cert.z_min:.3f}; rivals defeated (Z_ab > beta_ab): "
                 f"{cert.n_defeated:,} of {cert.n_rivals:,}")
    lines.append("  weakest rivals:")
    head = ("item" if cert.k > 1 else "", "rival", "mean", "answers", "Z_ab", "Z_ab - beta", "defeated")
    rows = [(r.item_name if cert.k > 1 else "", r.rival_name, _num(r.mean_rival), f"{r.n_rival:,}", _num(r.z),
             _num(r.margin), "yes" if r.defeated else "NO") for r in cert.rivals[:shown]]
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)]
    widths = [min(w, 32) for w in widths]
    for row in (head, *rows):
        cells = [(c if len(c) <= 32 else c[:31] + "…").ljust(w) if i < 2 else c.rjust(w)
                 for i, (c, w) in enumerate(zip(row, widths, strict=True)) if i > 0 or cert.k > 1]
        lines.append("    " + "  ".join(cells))
    rest = cert.n_rivals - len(rows)
    if rest > 0:
        undefeated = sum(not r.defeated for r in cert.rivals[shown:])
        lines.append(f"    ... {rest:,} more rivals, " + ("all defeated" if not undefeated
                                                             else f"{undefeated:,} of them not defeated")
                     + " (--json lists every one)")
    lines.append("")
    lines.extend(textwrap.wrap(cert.explanation, width=100))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Certify the export's recommendation; 0 if it holds, 1 if not, 2 on bad input."""
    from purebandits.certificate import certify

    if args.delta is None:
        print("error: --delta is required: the answers export does not record the experiment's error probability "
              "(use the one the experiment was created with)", file=sys.stderr)
        return 2
    try:
        data = read_answers_export(args.export, args.learner, args.n_items)
        cert = certify(data.counts, data.values, args.delta, k=args.k, recommendation=args.recommend,
                       threshold=args.threshold, items=data.item_ids, exact_rivals=None if args.json else SHOWN_RIVALS)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        out = cert.to_dict()
        out["source"] = {"file": args.export, "learner": args.learner, "learners": data.learners,
                         "values": data.values}
        print(json.dumps(out, indent=2))
    else:
        who = f"learner {args.learner}" if args.learner else f"all learners pooled ({', '.join(data.learners)})"
        print(format_certificate(cert, f"{args.export}, {who}"))
    return 0 if cert.holds else 1
