"""Compiled inner loops of the HFile reader and writer (numba, cached on disk, GIL released).

Cells are variable-length and chained, so a block cannot be decoded with vectorised numpy; these loops walk the
uncompressed payload of a data block once. Every kernel reports malformed input through a negative status or an
error position instead of raising, so the Python caller can name the file and block at fault.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_jit = nb.njit(cache=True, nogil=True)


@_jit
def _be16(b, p):
    return (np.int64(b[p]) << 8) | np.int64(b[p + 1])


@_jit
def _be32(b, p):
    v = (np.int64(b[p]) << 24) | (np.int64(b[p + 1]) << 16) | (np.int64(b[p + 2]) << 8) | np.int64(b[p + 3])
    if v >= 0x80000000:
        v -= 0x100000000
    return v


@_jit
def _vint_size(first):
    b = np.int64(first)
    if b > 127:
        b -= 256
    if b >= -112:
        return 1
    if b < -120:
        return -119 - b
    return -111 - b


@_jit
def _cmp(a, a0, alen, b, b0, blen):
    """Unsigned lexicographic comparison of a[a0:a0+alen] and b[b0:b0+blen]: -1, 0 or 1."""
    n = min(alen, blen)
    for i in range(n):
        x = a[a0 + i]
        y = b[b0 + i]
        if x != y:
            return -1 if x < y else 1
    if alen == blen:
        return 0
    return -1 if alen < blen else 1


@_jit
def _next_cell(buf, pos, mvcc, tags):
    """Decode the cell at pos: (row_start, row_len, value_start, value_len, next_pos); next_pos < 0 if corrupt."""
    n = len(buf)
    if pos + 8 > n:
        return 0, 0, 0, 0, -1
    klen = _be32(buf, pos)
    vlen = _be32(buf, pos + 4)
    if klen < 12 or vlen < 0:
        return 0, 0, 0, 0, -1
    k0 = pos + 8
    if k0 + klen > n:
        return 0, 0, 0, 0, -1
    rlen = _be16(buf, k0)
    if 2 + rlen + 10 > klen:
        return 0, 0, 0, 0, -1
    v0 = k0 + klen
    p = v0 + vlen
    if tags:
        if p + 2 > n:
            return 0, 0, 0, 0, -1
        p += 2 + _be16(buf, p)
    if mvcc:
        if p >= n:
            return 0, 0, 0, 0, -1
        p += _vint_size(buf[p])
    if p > n:
        return 0, 0, 0, 0, -1
    return k0 + 2, rlen, v0, vlen, p


@_jit
def parse_cells(buf, mvcc, tags):
    """All cells of a data block payload: (count, row_start, row_len, value_start, value_len, error_pos).

    error_pos is -1 when the payload decoded cleanly, else the payload offset of the first bad cell.
    """
    cap = len(buf) // 20 + 1
    rs = np.empty(cap, np.int64)
    rl = np.empty(cap, np.int64)
    vs = np.empty(cap, np.int64)
    vl = np.empty(cap, np.int64)
    pos = 0
    n = 0
    end = len(buf)
    while pos < end:
        a, b, c, d, nxt = _next_cell(buf, pos, mvcc, tags)
        if nxt < 0 or n >= cap:
            return n, rs[:n], rl[:n], vs[:n], vl[:n], pos
        rs[n] = a
        rl[n] = b
        vs[n] = c
        vl[n] = d
        n += 1
        pos = nxt
    return n, rs[:n], rl[:n], vs[:n], vl[:n], -1


@_jit
def lookup_block(buf, mvcc, tags, qdata, qoff, lo, hi, out_start, out_len):
    """Merge-join sorted query keys qoff[lo:hi] with the sorted cells of one block.

    For each query i found, out_start[i]/out_len[i] get the value's position in buf (the first cell of the row);
    absent queries get out_len[i] = -1. Returns -1, or the payload offset of a corrupt cell.
    """
    pos = 0
    end = len(buf)
    qi = lo
    for i in range(lo, hi):
        out_len[i] = -1
    while qi < hi and pos < end:
        r0, rl, v0, vl, nxt = _next_cell(buf, pos, mvcc, tags)
        if nxt < 0:
            return pos
        while qi < hi:
            c = _cmp(buf, r0, rl, qdata, qoff[qi], qoff[qi + 1] - qoff[qi])
            if c > 0:  # row beyond the query: query absent
                qi += 1
            elif c == 0:  # found; stay on this cell for duplicate queries
                out_start[qi] = v0
                out_len[qi] = vl
                qi += 1
            else:
                break
        pos = nxt
    return -1


@_jit
def floor_blocks(qdata, qoff, kdata, koff, last_data, last_len):
    """For each sorted query, the index of the last block whose first key <= query (-1: none or past last key)."""
    nq = len(qoff) - 1
    nk = len(koff) - 1
    out = np.empty(nq, np.int64)
    j = -1
    for i in range(nq):
        q0 = qoff[i]
        ql = qoff[i + 1] - q0
        while j + 1 < nk and _cmp(kdata, koff[j + 1], koff[j + 2] - koff[j + 1], qdata, q0, ql) <= 0:
            j += 1
        if last_len >= 0 and _cmp(qdata, q0, ql, last_data, 0, last_len) > 0:
            out[i] = -1
        else:
            out[i] = j
    return out


@_jit
def lower_bound(buf, rs, rl, key, strict):
    """First cell index whose row is >= key (> key if strict), by binary search over parsed rows."""
    lo = 0
    hi = len(rs)
    while lo < hi:
        mid = (lo + hi) // 2
        c = _cmp(buf, rs[mid], rl[mid], key, 0, len(key))
        if c < 0 or (strict and c == 0):
            lo = mid + 1
        else:
            hi = mid
    return lo


@_jit
def gather(buf, starts, lens):
    """Concatenate buf[starts[i]:starts[i]+lens[i]] (skipping lens < 0); returns (data, int32 offsets)."""
    n = len(starts)
    total = 0
    for i in range(n):
        if lens[i] > 0:
            total += lens[i]
    data = np.empty(total, np.uint8)
    offs = np.empty(n + 1, np.int32)
    p = 0
    offs[0] = 0
    for i in range(n):
        ln = lens[i]
        if ln > 0:
            s = starts[i]
            data[p : p + ln] = buf[s : s + ln]
            p += ln
        offs[i + 1] = p
    return data, offs


# -- writer ----------------------------------------------------------------------------------------------
@_jit
def first_unsorted(kdata, koff):
    """Index i of the first key that is not strictly greater than key i-1, or -1 when strictly increasing."""
    n = len(koff) - 1
    for i in range(1, n):
        if _cmp(kdata, koff[i - 1], koff[i] - koff[i - 1], kdata, koff[i], koff[i + 1] - koff[i]) >= 0:
            return i
    return -1


@_jit
def plan_blocks(koff, voff, block_size, overhead, used, count):
    """Block cut points for appended cells, continuing a block already holding ``count`` cells/``used`` bytes.

    A new block starts before a cell when the current block is not empty and the cell would take it past
    block_size (Hudi's rule). Returns (cuts, used_after, count_after): cuts are indices where a block starts.
    """
    n = len(koff) - 1
    cuts = np.empty(n, np.int64)
    nc = 0
    for i in range(n):
        sz = (koff[i + 1] - koff[i]) + (voff[i + 1] - voff[i]) + overhead
        if count > 0 and used + sz > block_size:
            cuts[nc] = i
            nc += 1
            used = 0
            count = 0
        used += sz
        count += 1
    return cuts[:nc], used, count


@_jit
def build_cells(kdata, koff, vdata, voff, lo, hi):
    """Serialise cells lo..hi-1 as Hudi writes them: klen, vlen, rowlen, row, 0, LATEST ts, Put, value, MVCC 0."""
    total = 0
    for i in range(lo, hi):
        total += (koff[i + 1] - koff[i]) + (voff[i + 1] - voff[i]) + 21
    out = np.empty(total, np.uint8)
    p = 0
    for i in range(lo, hi):
        k0 = koff[i]
        rl = koff[i + 1] - k0
        v0 = voff[i]
        vl = voff[i + 1] - v0
        kl = rl + 12
        out[p] = (kl >> 24) & 0xFF
        out[p + 1] = (kl >> 16) & 0xFF
        out[p + 2] = (kl >> 8) & 0xFF
        out[p + 3] = kl & 0xFF
        out[p + 4] = (vl >> 24) & 0xFF
        out[p + 5] = (vl >> 16) & 0xFF
        out[p + 6] = (vl >> 8) & 0xFF
        out[p + 7] = vl & 0xFF
        out[p + 8] = (rl >> 8) & 0xFF
        out[p + 9] = rl & 0xFF
        p += 10
        out[p : p + rl] = kdata[k0 : k0 + rl]
        p += rl
        out[p] = 0
        out[p + 1] = 0x7F
        for j in range(2, 9):
            out[p + j] = 0xFF
        out[p + 9] = 4
        p += 10
        out[p : p + vl] = vdata[v0 : v0 + vl]
        p += vl
        out[p] = 0
        p += 1
    return out
