"""SciPy's incomplete beta function and its inverse, callable from cached Numba kernels.

``scipy.special.cython_special`` exports C entry points (Boost's ``ibeta`` and
``ibeta_inv``). They are registered with LLVM under fixed symbol names and called as
``numba.types.ExternalFunction``, so a kernel that uses them refers to the symbol by name and
can still be cached (a ctypes pointer would be a process-specific constant, which disables
Numba's cache). Thompson sampling's thresholded draw (:mod:`purebandits.algorithms.thompson`)
is their user.
"""

from __future__ import annotations

import llvmlite.binding as llvm
from numba import types
from numba.extending import get_cython_function_address

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)

__all__ = ["betainc", "betaincinv"]

_SIGNATURE = types.float64(types.float64, types.float64, types.float64, types.int32)
for _name in ("betainc", "betaincinv"):
    # "__pyx_fuse_0" is the double-precision specialisation; the last argument is Cython's
    # skip-dispatch flag (pass 0)
    llvm.add_symbol(f"purebandits_{_name}", get_cython_function_address("scipy.special.cython_special",
                                                                        f"__pyx_fuse_0{_name}"))

#: ``betainc(a, b, x, 0)``: the regularised incomplete beta function I_x(a, b), the CDF of Beta(a, b) at x
betainc = types.ExternalFunction("purebandits_betainc", _SIGNATURE)
#: ``betaincinv(a, b, p, 0)``: the x with I_x(a, b) = p
betaincinv = types.ExternalFunction("purebandits_betaincinv", _SIGNATURE)
