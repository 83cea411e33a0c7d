"""Compiled inner loops of the file-slice merge (numba, cached on disk, GIL released).

- a hash table over the record keys of a slice's log records (UTF-8 bytes in an Arrow binary layout), built once
  and probed with every batch of the base file;
- the per-key fold of log records in log order: Hudi's ``deltaMerge`` of each new log record (or delete) into
  the record buffered for its key, see :mod:`pyhudi.read.merge`.

Errors come back as a status and an event index, never as exceptions, so the caller can name the key and file.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_jit = nb.njit(cache=True, nogil=True)

_SEED = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_M3 = np.uint64(0xBF58476D1CE4E5B9)


@_jit
def _hash(data, a, b):
    """A 64-bit hash of data[a:b], eight bytes at a time (multiply-xorshift mixing; equal keys are always
    compared byte for byte after a hash match)."""
    h = _SEED ^ np.uint64(b - a)
    p = a
    while p + 8 <= b:
        w = np.uint64(0)
        for k in range(8):
            w |= np.uint64(data[p + k]) << np.uint64(8 * k)
        h = (h ^ w) * _M1
        h ^= h >> np.uint64(32)
        p += 8
    w = np.uint64(0)
    sh = np.uint64(0)
    while p < b:
        w |= np.uint64(data[p]) << sh
        sh += np.uint64(8)
        p += 1
    h = (h ^ w) * _M2
    h ^= h >> np.uint64(29)
    h *= _M3
    h ^= h >> np.uint64(32)
    return h


@_jit
def _equal(d1, a1, b1, d2, a2, b2):
    if b1 - a1 != b2 - a2:
        return False
    for i in range(b1 - a1):  # noqa: SIM110 (a compiled loop)
        if d1[a1 + i] != d2[a2 + i]:
            return False
    return True


@_jit
def build_table(data, offsets, slots):
    """Insert keys 0..n-1 (distinct) into an open-addressing table ``slots`` (shape (size, 2), size a power of
    two, all -1): each slot holds a key's hash and index side by side, so a probe touches one cache line before it
    compares key bytes."""
    n = len(offsets) - 1
    mask = np.uint64(slots.shape[0] - 1)
    for i in range(n):
        h = _hash(data, offsets[i], offsets[i + 1])
        s = h & mask
        while slots[s, 1] >= 0:
            s = (s + np.uint64(1)) & mask
        slots[s, 0] = np.int64(h)
        slots[s, 1] = i


@_jit
def probe_table(slots, data, offsets, qdata, qoffsets, out):
    """out[j] = the index of query key j among the table's keys, or -1."""
    mask = np.uint64(slots.shape[0] - 1)
    for j in range(len(qoffsets) - 1):
        a, b = qoffsets[j], qoffsets[j + 1]
        h = _hash(qdata, a, b)
        hi = np.int64(h)
        s = h & mask
        out[j] = -1
        while True:
            i = slots[s, 1]
            if i < 0:
                break
            if slots[s, 0] == hi and _equal(data, offsets[i], offsets[i + 1], qdata, a, b):
                out[j] = i
                break
            s = (s + np.uint64(1)) & mask
    return out


@_jit
def encode_keys(data, offsets, slots, ids, first):
    """Dictionary-encode keys 0..n-1 (repeats allowed): ``ids[i]`` = the id of key i (ids count from 0 in order of
    first appearance), ``first[id]`` = the key index where it first appears; ``slots`` (shape (size, 2), all -1,
    size a power of two > number of distinct keys) keeps hash and id. Returns the number of distinct keys."""
    n = len(offsets) - 1
    mask = np.uint64(slots.shape[0] - 1)
    nid = 0
    for i in range(n):
        a, b = offsets[i], offsets[i + 1]
        h = _hash(data, a, b)
        hi = np.int64(h)
        s = h & mask
        while True:
            k = slots[s, 1]
            if k < 0:
                slots[s, 0] = hi
                slots[s, 1] = nid
                first[nid] = i
                ids[i] = nid
                nid += 1
                break
            if slots[s, 0] == hi:
                f = first[k]
                if _equal(data, offsets[f], offsets[f + 1], data, a, b):
                    ids[i] = k
                    break
            s = (s + np.uint64(1)) & mask
    return nid


@_jit
def probe_ids(slots, first, data, offsets, qdata, qoffsets, out):
    """out[j] = the id (see :func:`encode_keys`) of query key j, or -1 if it is not among the keys."""
    mask = np.uint64(slots.shape[0] - 1)
    for j in range(len(qoffsets) - 1):
        a, b = qoffsets[j], qoffsets[j + 1]
        h = _hash(qdata, a, b)
        hi = np.int64(h)
        s = h & mask
        out[j] = -1
        while True:
            k = slots[s, 1]
            if k < 0:
                break
            if slots[s, 0] == hi:
                f = first[k]
                if _equal(data, offsets[f], offsets[f + 1], qdata, a, b):
                    out[j] = k
                    break
            s = (s + np.uint64(1)) & mask
    return out


# event kinds
DATA = 0
DELETE_ENTRY = 1
# ordering classes (see pyhudi.read.merge): FIELD values are ranked; INT_DEFAULT is Java's Integer 0
CLS_FIELD = 0
CLS_INT_DEFAULT = 1
# fold statuses
OK = 0
E_INCOMPARABLE = -1  # Hudi compares ordering values of different Java classes (ClassCastException)
E_UNRANKED = -2  # ordering values of a class pyhudi does not rank (same class, not the field's)

COMMIT_TIME = 0
EVENT_TIME = 1


@_jit
def fold(key_id, n_keys, kind, is_ctd, cls, rank, mode, state):
    """Fold events (in log order) per key: ``state[k]`` = the event buffered for key k (-1: none yet).

    COMMIT_TIME: every event replaces the buffered one. EVENT_TIME, Hudi's ``EventTimeRecordMerger.deltaMerge``:
    - a delete entry (from a delete block) against the buffered event: kept out if the buffered one is a
      commit-time-ordering delete; else it replaces it unless it has a real ordering value of the same class and
      the buffered one's is strictly greater;
    - a data record (``_hoodie_is_deleted`` ones included) replaces the buffered one when either is a
      commit-time-ordering delete or its ordering value is >= the buffered one's (ties go to the later record).
    Returns (status, event index): an error status when Hudi would compare values of different classes.
    """
    for e in range(len(key_id)):
        k = key_id[e]
        s = state[k]
        if s < 0 or mode == COMMIT_TIME:
            state[k] = e
            continue
        if kind[e] == DELETE_ENTRY:
            if is_ctd[s]:
                continue
            if is_ctd[e] or cls[s] != cls[e]:
                state[k] = e
                continue
            if cls[e] == CLS_FIELD:
                if not rank[s] > rank[e]:
                    state[k] = e
                continue
            if cls[e] == CLS_INT_DEFAULT:
                state[k] = e  # Integer 0 vs Integer 0: not greater
                continue
            return E_UNRANKED, e
        if is_ctd[e] or is_ctd[s]:
            state[k] = e
            continue
        if cls[s] != cls[e]:
            return E_INCOMPARABLE, e
        if cls[e] == CLS_FIELD:
            if rank[e] >= rank[s]:
                state[k] = e
            continue
        if cls[e] == CLS_INT_DEFAULT:
            state[k] = e
            continue
        return E_UNRANKED, e
    return OK, -1


@_jit
def dense_rank(order, same_as_previous, out):
    """Dense ranks of sorted values: ``order`` the sort permutation, ``same_as_previous[i]`` whether sorted value i
    equals sorted value i - 1."""
    r = np.int64(-1)
    for i in range(len(order)):
        if i == 0 or not same_as_previous[i]:
            r += 1
        out[order[i]] = r
    return out
