"""Numba's on-disk cache of the package's kernels, stamped with a digest of all their sources.

Why: ``@njit(cache=True)`` stamps a cached function with the modification time and size of
*its own* source file only. A kernel compiled into the cache inlines (or links) its callees from
other modules, so after an edit to a callee alone, or an upgrade that leaves the caller's file
as it was, numba loads the *old* machine code: a previous run of this project measured the old
KL-LUCB kernel running after its bracket code changed, because ``family_kernel``'s file had not.
Here each cached function of the package is stamped, in addition, with a digest of the content
of every package module that imports numba at its top level; any change to any of them makes every cached
kernel of the package stale, and numba recompiles it and overwrites the entry (stale entries are
replaced in place, so nothing accumulates on disk). Functions outside the package are untouched.

The cache stays where numba puts it (``NUMBA_CACHE_DIR`` if set, else ``__pycache__`` beside the
source, else the user-wide cache directory): the stamped locators below are the same locators
with a longer stamp, tried before numba's own for files under the package. They must be
installed before the first ``@njit(cache=True)`` of the package is decorated, which is why
importing this module stamps the package's own directory, and every module of the package that
uses numba imports this one first (``tests/test_kernel_cache.py`` holds every such module to it).
Importing ``purebandits`` alone loads neither numba nor any kernel: the service and the command
line start without them and load them on first use. ``NUMBA_CACHE_LOCATOR_CLASSES``, where numba
supports it, overrides all of this.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from numba.core import caching

__all__ = ["sources_digest", "stamp_package_kernels", "stamped_digest"]

#: numba's locators, by the names of recent releases (older ones had a leading underscore)
_CACHE_IMPL = getattr(caching, "CacheImpl", None) or caching._CacheImpl
_BASES = tuple(getattr(caching, name, None) or getattr(caching, "_" + name)
               for name in ("UserProvidedCacheLocator", "InTreeCacheLocator", "UserWideCacheLocator"))


_IMPORTS_NUMBA = re.compile(rb"^(?:import numba|from numba[ .])", re.MULTILINE)


def sources_digest(package_dir: Path) -> str:
    """SHA-256 of the relative path and content of every ``.py`` file under ``package_dir`` that
    imports numba at its top level (the files whose compiled code can end up inside a cached kernel:
    a kernel, or a function a kernel calls, is decorated with something of numba's). A module that
    only names numba in its text, or imports it inside a function to report on it (the service's
    settings and warm-up), is left out, so editing it does not send every kernel to be compiled again."""
    h = hashlib.sha256()
    for path in sorted(package_dir.rglob("*.py")):
        data = path.read_bytes()
        if _IMPORTS_NUMBA.search(data):
            h.update(path.relative_to(package_dir).as_posix().encode())
            h.update(b"\0")
            h.update(data)
            h.update(b"\0")
    return h.hexdigest()


def _stamped(base: type, root: str, digest: str) -> type:
    """``base`` restricted to files under ``root``, its source stamp extended with ``digest``."""

    class Stamped(base):
        package_root = root

        @classmethod
        def from_function(cls, py_func, py_file):
            if not os.path.abspath(py_file).startswith(root):
                return None
            return base.from_function.__func__(cls, py_func, py_file)

        def get_source_stamp(self):
            return (base.get_source_stamp(self), digest)

    Stamped.__name__ = Stamped.__qualname__ = f"PackageStamped{base.__name__}"
    return Stamped


#: the digest each stamped package directory's kernels carry, by directory (with a trailing separator)
_STAMPED: dict[str, str] = {}


def _root(package_dir: Path) -> str:
    return os.path.join(os.path.abspath(package_dir), "")


def stamped_digest(package_dir: Path) -> str:
    """The digest the cached kernels under ``package_dir`` are stamped with in this process (computed now
    if :func:`stamp_package_kernels` was not called for it)."""
    return _STAMPED.get(_root(package_dir)) or sources_digest(Path(package_dir))


def stamp_package_kernels(package_dir: Path, extra: str = "") -> str:
    """Install locators that stamp the cached kernels under ``package_dir`` with :func:`sources_digest`
    (followed by ``extra``: the test suite passes the package's digest, since its compiled helpers call the
    package's kernels).

    Idempotent per directory (a second call replaces the first's locators, so a changed source
    tree read again gets its new digest). Returns the digest.
    """
    root = _root(package_dir)
    digest = _STAMPED[root] = sources_digest(Path(package_dir)) + extra
    classes = [c for c in _CACHE_IMPL._locator_classes if getattr(c, "package_root", None) != root]
    _CACHE_IMPL._locator_classes = [_stamped(base, root, digest) for base in _BASES] + classes
    return digest


#: the digest the package's own kernels carry: stamped when the first compiled module of the package imports this one
PACKAGE_DIGEST = stamp_package_kernels(Path(__file__).parent)
