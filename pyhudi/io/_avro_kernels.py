"""Compiled inner loops of the Avro datum decoder (numba, cached on disk, GIL released).

An Avro data block holds ``int32 length`` + binary datum per record; every field of a flat record is a varint, a
fixed-size value or a length-prefixed byte run, chained, so the records are walked once here and the columns come
out as numpy arrays (fixed-width values, validity, and the positions of variable-length values in the input).
Malformed input is reported through a negative status and the record number, never by raising.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_jit = nb.njit(cache=True, nogil=True)

# field kinds (see pyhudi.io.avro_arrow)
K_NULL = 0
K_BOOL = 1
K_INT = 2
K_LONG = 3
K_FLOAT = 4
K_DOUBLE = 5
K_BYTES = 6
K_FIXED = 7
K_ENUM = 8

# statuses
OK = 0
E_TRUNCATED = -1  # a value runs past the record (or the block)
E_LENGTH = -2  # the record's datum does not end where its length prefix says
E_BRANCH = -3  # a union branch that the schema does not have
E_VARINT = -4  # a varint longer than 10 bytes, or an int out of int32 range
E_NEGATIVE = -5  # a negative length


@_jit
def _varint(buf, p, end):
    """(zigzag-decoded value, next position); next position < 0 on error."""
    acc = np.uint64(0)
    shift = np.uint64(0)
    while True:
        if p >= end:
            return np.int64(0), -1
        b = np.uint64(buf[p])
        p += 1
        acc |= (b & np.uint64(0x7F)) << shift
        if b < np.uint64(0x80):
            break
        shift += np.uint64(7)
        if shift > np.uint64(63):
            return np.int64(0), -2
    v = np.int64(acc >> np.uint64(1)) ^ -np.int64(acc & np.uint64(1))
    return v, p


@_jit
def decode_records(buf, pos, end, n, kinds, null_branch, fixed_size, fix_col, var_col,
                   fixed_out, valid_out, var_start, var_len):
    """Decode ``n`` length-prefixed records from ``buf[pos:end]``.

    Per field j: ``kinds[j]``; ``null_branch[j]`` = -1 for a plain field, else the union branch (0 or 1) that is
    null in a two-branch nullable union; ``fixed_size[j]`` for FIXED; ``fix_col[j]`` / ``var_col[j]`` the row of
    ``fixed_out`` (int64 bits) / ``var_start`` + ``var_len`` it fills (-1 if none). ``valid_out[j, i]`` is 1 when
    the value is not null. Returns (status, record index, position after the last record).
    """
    nf = len(kinds)
    for i in range(n):
        if pos + 4 > end:
            return E_TRUNCATED, i, pos
        ln = (np.int64(buf[pos]) << 24) | (np.int64(buf[pos + 1]) << 16) | (np.int64(buf[pos + 2]) << 8) \
            | np.int64(buf[pos + 3])
        if ln >= 0x80000000:
            ln -= 0x100000000
        if ln < 0:
            return E_NEGATIVE, i, pos
        p = pos + 4
        rend = p + ln
        if rend > end:
            return E_TRUNCATED, i, pos
        for j in range(nf):
            k = kinds[j]
            nb_ = null_branch[j]
            if nb_ >= 0:
                br, p = _varint(buf, p, rend)
                if p < 0:
                    return E_TRUNCATED if p == -1 else E_VARINT, i, pos
                if br != 0 and br != 1:
                    return E_BRANCH, i, pos
                if br == nb_:
                    valid_out[j, i] = 0
                    continue
            if k == K_NULL:
                valid_out[j, i] = 0
                continue
            valid_out[j, i] = 1
            if k in (K_INT, K_LONG, K_ENUM):
                v, p = _varint(buf, p, rend)
                if p < 0:
                    return E_TRUNCATED if p == -1 else E_VARINT, i, pos
                if k != K_LONG and (v < -2147483648 or v > 2147483647):
                    return E_VARINT, i, pos
                fixed_out[fix_col[j], i] = v
            elif k == K_BOOL:
                if p >= rend:
                    return E_TRUNCATED, i, pos
                fixed_out[fix_col[j], i] = 1 if buf[p] != 0 else 0
                p += 1
            elif k == K_FLOAT:
                if p + 4 > rend:
                    return E_TRUNCATED, i, pos
                bits = np.int64(buf[p]) | (np.int64(buf[p + 1]) << 8) | (np.int64(buf[p + 2]) << 16) \
                    | (np.int64(buf[p + 3]) << 24)
                fixed_out[fix_col[j], i] = bits
                p += 4
            elif k == K_DOUBLE:
                if p + 8 > rend:
                    return E_TRUNCATED, i, pos
                dbits = np.uint64(0)
                for b in range(8):
                    dbits |= np.uint64(buf[p + b]) << np.uint64(8 * b)
                fixed_out[fix_col[j], i] = np.int64(dbits)
                p += 8
            elif k == K_BYTES:
                ln2, p = _varint(buf, p, rend)
                if p < 0:
                    return E_TRUNCATED if p == -1 else E_VARINT, i, pos
                if ln2 < 0:
                    return E_NEGATIVE, i, pos
                if p + ln2 > rend:
                    return E_TRUNCATED, i, pos
                var_start[var_col[j], i] = p
                var_len[var_col[j], i] = ln2
                p += ln2
            elif k == K_FIXED:
                fs = fixed_size[j]
                if p + fs > rend:
                    return E_TRUNCATED, i, pos
                var_start[var_col[j], i] = p
                var_len[var_col[j], i] = fs
                p += fs
        if p != rend:
            return E_LENGTH, i, pos
        pos = rend
    return OK, n, pos


@_jit
def gather(buf, starts, lens, valid, out, offsets):
    """Copy the variable-length values (starts/lens into buf) one after another into ``out``; ``offsets`` gets
    n + 1 entries. Null values are empty."""
    o = np.int64(0)
    offsets[0] = 0
    for i in range(len(starts)):
        if valid[i]:
            s = starts[i]
            ln = lens[i]
            out[o : o + ln] = buf[s : s + ln]
            o += ln
        offsets[i + 1] = o
    return o


@_jit
def big_endian_to_decimal128(buf, starts, lens, valid, out):
    """Two's complement big-endian unscaled values (1..16 bytes) -> little-endian 128-bit words (``out`` is
    uint8[n, 16]). Returns the index of the first value longer than 16 bytes, or -1."""
    for i in range(len(starts)):
        if not valid[i]:
            continue
        s = starts[i]
        ln = lens[i]
        if ln > 16 or ln < 1:
            if ln == 0:
                continue
            return i
        neg = buf[s] >= 128
        for b in range(16):
            if b < ln:
                out[i, b] = buf[s + ln - 1 - b]
            else:
                out[i, b] = 255 if neg else 0
    return -1


@_jit
def _put_varint(out, p, v):
    z = np.uint64((v << 1) ^ (v >> 63))
    while z >= np.uint64(0x80):
        out[p] = np.uint8((z & np.uint64(0x7F)) | np.uint64(0x80))
        p += 1
        z >>= np.uint64(7)
    out[p] = np.uint8(z)
    return p + 1


@_jit
def encode_records(n, kinds, null_branch, fixed_size, fix_col, var_col, fixed_in, valid, var_data, var_offs,
                   dec_in, dec_col, out):
    """Encode ``n`` records, each as int32 big-endian length + Avro binary datum, into ``out`` (large enough);
    returns (end position, status, record). Inputs as :func:`decode_records` produces them; ``dec_in`` holds the
    16-byte little-endian unscaled values of decimal fields (row ``dec_col[j]``), written big-endian in
    ``fixed_size[j]`` bytes (FIXED) or in the fewest bytes (BYTES)."""
    p = 0
    nf = len(kinds)
    for i in range(n):
        start = p
        p += 4
        for j in range(nf):
            k = kinds[j]
            nb_ = null_branch[j]
            if nb_ >= 0:
                if not valid[j, i]:
                    p = _put_varint(out, p, np.int64(nb_))
                    continue
                p = _put_varint(out, p, np.int64(1 - nb_))
            elif not valid[j, i] and k != K_NULL:
                return p, E_BRANCH, i  # a null in a field that is not nullable
            if k == K_NULL:
                continue
            if k in (K_INT, K_LONG, K_ENUM):
                p = _put_varint(out, p, fixed_in[fix_col[j], i])
            elif k == K_BOOL:
                out[p] = 1 if fixed_in[fix_col[j], i] != 0 else 0
                p += 1
            elif k == K_FLOAT:
                bits = fixed_in[fix_col[j], i]
                for b in range(4):
                    out[p + b] = np.uint8((bits >> (8 * b)) & 0xFF)
                p += 4
            elif k == K_DOUBLE:
                ubits = np.uint64(fixed_in[fix_col[j], i])
                for b in range(8):
                    out[p + b] = np.uint8((ubits >> np.uint64(8 * b)) & np.uint64(0xFF))
                p += 8
            elif dec_col[j] >= 0:
                d = dec_col[j]
                neg = dec_in[d, i, 15] >= 128
                if k == K_FIXED:
                    size = fixed_size[j]
                else:  # the fewest bytes of the two's complement
                    size = 16
                    while size > 1:
                        top = dec_in[d, i, size - 1]
                        nxt = dec_in[d, i, size - 2]
                        if (top == 0 and nxt < 128 and not neg) or (top == 255 and nxt >= 128 and neg):
                            size -= 1
                        else:
                            break
                    p = _put_varint(out, p, np.int64(size))
                for b in range(16 - 1, size - 1, -1):  # the bytes left out must be sign extension
                    if dec_in[d, i, b] != (255 if neg else 0):
                        return p, E_VARINT, i
                for b in range(size):
                    out[p + b] = dec_in[d, i, size - 1 - b]
                p += size
            else:
                v = var_col[j]
                a = var_offs[v, i]
                e = var_offs[v, i + 1]
                ln = e - a
                if k == K_FIXED:
                    if ln != fixed_size[j]:
                        return p, E_LENGTH, i
                else:
                    p = _put_varint(out, p, ln)
                for b in range(ln):
                    out[p + b] = var_data[a + b]
                p += ln
        ln = p - start - 4
        out[start] = np.uint8((ln >> 24) & 0xFF)
        out[start + 1] = np.uint8((ln >> 16) & 0xFF)
        out[start + 2] = np.uint8((ln >> 8) & 0xFF)
        out[start + 3] = np.uint8(ln & 0xFF)
    return p, OK, n


@_jit
def decode_delete_list(buf, pos, end, kstart, klen, pstart, plen, otype, oint, ofloat, vstart, vlen):
    """Decode the ``HoodieDeleteRecordList`` datum in ``buf[pos:end]`` into the given arrays (sized by the caller
    for (end - pos) // 3 + 1 entries: every entry takes at least 3 bytes). Per entry: record key and partition path (start/len,
    len -1 for null), the ordering value's union branch and value (ints, float bits as doubles, or a byte run).
    Returns (status, entries, position); ARRAY ordering values (branch 12) stop with status 1 and the entry index
    so the caller decodes the block another way."""
    i = 0
    while True:
        count, pos = _varint(buf, pos, end)
        if pos < 0:
            return E_TRUNCATED, i, pos
        if count == 0:
            break
        if count < 0:
            count = -count
            _, pos = _varint(buf, pos, end)
            if pos < 0:
                return E_TRUNCATED, i, pos
        for _ in range(count):
            if i >= len(kstart):
                return E_LENGTH, i, pos
            for which in range(2):
                br, pos = _varint(buf, pos, end)
                if pos < 0:
                    return E_TRUNCATED, i, pos
                if br == 0:
                    if which == 0:
                        klen[i] = -1
                    else:
                        plen[i] = -1
                    continue
                if br != 1:
                    return E_BRANCH, i, pos
                ln, pos = _varint(buf, pos, end)
                if pos < 0 or ln < 0 or pos + ln > end:
                    return E_TRUNCATED, i, pos
                if which == 0:
                    kstart[i] = pos
                    klen[i] = ln
                else:
                    pstart[i] = pos
                    plen[i] = ln
                pos += ln
            br, pos = _varint(buf, pos, end)
            if pos < 0:
                return E_TRUNCATED, i, pos
            otype[i] = br
            if br == 0:
                pass
            elif br == 1:  # boolean
                if pos >= end:
                    return E_TRUNCATED, i, pos
                oint[i] = 1 if buf[pos] != 0 else 0
                pos += 1
            elif br in (2, 3, 8, 10, 11):
                v, pos = _varint(buf, pos, end)
                if pos < 0:
                    return E_TRUNCATED, i, pos
                oint[i] = v
            elif br == 4:
                if pos + 4 > end:
                    return E_TRUNCATED, i, pos
                bits = np.uint32(buf[pos]) | (np.uint32(buf[pos + 1]) << np.uint32(8)) \
                    | (np.uint32(buf[pos + 2]) << np.uint32(16)) | (np.uint32(buf[pos + 3]) << np.uint32(24))
                ofloat[i] = np.float64(np.array([bits], np.uint32).view(np.float32)[0])
                pos += 4
            elif br == 5:
                if pos + 8 > end:
                    return E_TRUNCATED, i, pos
                ofloat[i] = np.array([buf[pos + b] for b in range(8)], np.uint8).view(np.float64)[0]
                pos += 8
            elif br in (6, 7, 9):
                ln, pos = _varint(buf, pos, end)
                if pos < 0 or ln < 0 or pos + ln > end:
                    return E_TRUNCATED, i, pos
                vstart[i] = pos
                vlen[i] = ln
                pos += ln
            elif br == 12:
                return 1, i, pos
            else:
                return E_BRANCH, i, pos
            i += 1
    return OK, i, pos
