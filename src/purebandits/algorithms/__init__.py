"""Every learner of purebandits, one module per algorithm family.

Modules are discovered automatically: a learner class listed in its module's ``__all__``
is re-exported here and enrolled in the registry and the common test suite, so adding an
algorithm means adding one module. The private rules and fast paths the learners are built on live
in the :mod:`purebandits.algorithms.kernels` subpackage (its docstring maps each to its learner); no
private module sits at this level (``tests/test_code_shape.py``).
"""

from __future__ import annotations

import importlib
import pkgutil

from purebandits.base import Learner

__all__: list[str] = []

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if _info.name.startswith("_") or _info.ispkg:  # kernels/: the learners' private rules and fast paths
        continue
    _mod = importlib.import_module(f"{__name__}.{_info.name}")
    for _name in getattr(_mod, "__all__", []):
        _obj = getattr(_mod, _name)
        globals()[_name] = _obj
        if isinstance(_obj, type) and issubclass(_obj, Learner):
            __all__.append(_name)
del _info, _mod, _name, _obj
