"""The optional parts of the install and a clear error when one a command needs is missing.

``pip install purebandits`` is the library and the simulator; the service, Dask and the plots are extras
(``pyproject.toml``). A command that needs one calls :func:`require_extra` before importing it, so a user
reads which extra to install instead of a ``ModuleNotFoundError`` from deep inside.
"""

from __future__ import annotations

import importlib.util

__all__ = ["EXTRAS", "MissingExtraError", "require_extra"]

#: extra -> the top-level modules it installs that the code imports (what ``require_extra`` looks for)
EXTRAS: dict[str, tuple[str, ...]] = {
    "service": ("fastapi", "fastapi_offline", "sqlalchemy", "alembic", "uvicorn", "multipart", "jinja2",
                "httptools", "bokeh"),
    "dask": ("distributed",),
    "plot": ("matplotlib",),
    "postgres": ("psycopg",),
}


class MissingExtraError(ImportError):
    """A command needs an optional part of the install that is not there; the message names the extra."""


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken or half-removed package counts as missing
        return False


def require_extra(extra: str, what: str) -> None:
    """Raise :class:`MissingExtraError` naming ``extra`` unless all its modules are importable.

    ``what`` names the command or feature that needs it, e.g. ``"purebandits serve"``; the message reads
    "purebandits serve needs the service extra: pip install 'purebandits[service]' (missing: fastapi, ...)".
    """
    missing = [m for m in EXTRAS[extra] if not _installed(m)]
    if missing:
        raise MissingExtraError(f"{what} needs the {extra} extra: pip install 'purebandits[{extra}]' "
                                f"(missing: {', '.join(missing)})")
