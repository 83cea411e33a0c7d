"""Compiled inner loop of the record index's key routing (numba, cached on disk, GIL released)."""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True)
def ascii_file_groups(data, offsets, n, out):
    """out[i] = Hudi's file group of key i among ``n`` (Java ``String.hashCode``, then ``abs(abs(h) % n)``) for the
    keys whose UTF-8 bytes data[offsets[i]:offsets[i + 1]] are all ASCII (one byte = one UTF-16 unit); -1 for
    the others, which the caller routes itself."""
    for i in range(len(offsets) - 1):
        h = np.int64(0)
        ascii_only = True
        for p in range(offsets[i], offsets[i + 1]):
            b = np.int64(data[p])
            if b >= 128:
                ascii_only = False
                break
            h = (h * 31 + b) & 0xFFFFFFFF
        if not ascii_only:
            out[i] = -1
            continue
        if h >= 0x80000000:  # the int32 Java holds
            h -= 0x100000000
        out[i] = abs(h) % n  # Math.abs(Integer.MIN_VALUE) stays negative in Java; its remainder's abs is the same
    return out
