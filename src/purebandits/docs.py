"""Generate the learner table of ``docs/algorithms.md`` from the registry (kept in sync by a test)."""

from __future__ import annotations

import inspect

from purebandits.registry import all_learners

__all__ = ["algorithms_markdown"]

HEADER = """# Algorithms

Every learner keeps the ask/tell contract of `purebandits.base.Learner` and is built by name with
`purebandits.make_learner(name, **params)`. This table is generated from the registry
(`purebandits algorithms --markdown > docs/algorithms.md`); a test keeps it in sync.

| name | class | kind | paper | parameters (defaults) |
|---|---|---|---|---|
"""


def algorithms_markdown() -> str:
    """The Markdown table of all registered learners."""
    rows = []
    for name, cls in all_learners().items():
        sig = inspect.signature(cls.__init__)
        params = ", ".join(
            f"`{p.name}={p.default!r}`" for p in sig.parameters.values() if p.name != "self"
        )
        rows.append(f"| `{name}` | `{cls.__name__}` | {cls.kind} | {cls.paper} | {params} |")
    return HEADER + "\n".join(rows) + "\n"
