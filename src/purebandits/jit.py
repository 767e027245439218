"""Helpers for fast Numba kernels.

Why :func:`borrow` exists: every call from one ``@njit`` function to another that passes an
array (or a NumPy ``Generator``) increments and decrements the object's reference count with
atomic instructions, even when the callee is inlined. In a kernel that calls
``stream_draw(...)`` and a few heap helpers per pull, that bookkeeping costs more than the
algorithm itself (measured: ~25 ns per call with two arrays, against ~1.5 ns borrowed). A
*borrowed* view has the same data pointer, shape and strides but no reference count, so those
operations become a null test. Borrow at the top of a kernel, while the caller's arrays are alive::

    @njit(cache=True)
    def _kernel(counts, sums, kind, a, b, cdf, values, block, pos, rng):
        counts, sums = borrow(counts), borrow(sums)
        a, b, cdf, values, block, pos, rng = borrow_stream(a, b, cdf, values, block, pos, rng)
        ...

A borrowed view must not outlive the kernel call (never return it or store it in a container
that is returned); arrays created inside the kernel need no borrowing.
"""

from __future__ import annotations

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, register_jitable

import purebandits.kernel_cache  # noqa: F401  (stamps numba's cache before the kernels below compile)

__all__ = ["borrow", "borrow_stream"]


@intrinsic
def borrow(typingctx, obj):
    """A view of an array or ``numpy.random.Generator`` without reference counting."""
    if isinstance(obj, types.Array):
        def codegen(context, builder, sig, args):
            src = context.make_array(obj)(context, builder, value=args[0])
            out = context.make_array(obj)(context, builder)
            for name in ("nitems", "itemsize", "data", "shape", "strides"):
                setattr(out, name, getattr(src, name))
            out.meminfo = cgutils.get_null_value(out.meminfo.type)
            out.parent = cgutils.get_null_value(out.parent.type)
            return out._getvalue()

        return obj(obj), codegen
    if isinstance(obj, types.NumPyRandomGeneratorType):
        def codegen(context, builder, sig, args):
            src = cgutils.create_struct_proxy(obj)(context, builder, value=args[0])
            out = cgutils.create_struct_proxy(obj)(context, builder)
            out.bit_generator = src.bit_generator
            out.meminfo = cgutils.get_null_value(out.meminfo.type)
            out.parent = cgutils.get_null_value(out.parent.type)
            return out._getvalue()

        return obj(obj), codegen
    return None


@register_jitable
def borrow_stream(a, b, cdf, values, block, pos, rng):  # pragma: no cover - compiled
    """Borrow the seven reward-stream arguments (``stream.args()`` without ``kind``)."""
    return borrow(a), borrow(b), borrow(cdf), borrow(values), borrow(block), borrow(pos), borrow(rng)
