"""HFile blocks: the 33-byte header, checksums, payload compression (one codec per file)."""

from __future__ import annotations

import math
import struct
import zlib
from dataclasses import dataclass

import google_crc32c

from pyhudi.errors import CorruptFileError
from pyhudi.hfile.format import (
    BLOCK_HEADER_SIZE,
    BYTES_PER_CHECKSUM,
    CHECKSUM_CRC32,
    CHECKSUM_CRC32C,
    CHECKSUM_NULL,
    CHECKSUM_SIZE,
    HEADER_STRUCT,
    decode_hadoop_vint,
    encode_hadoop_vint,
)
from pyhudi.io.compression import CODEC_GZ, compress, decompress


@dataclass(frozen=True)
class BlockHeader:
    magic: bytes
    on_disk_size_without_header: int
    uncompressed_size_without_header: int
    prev_block_offset: int
    checksum_type: int
    bytes_per_checksum: int
    on_disk_data_size_with_header: int

    @property
    def on_disk_size(self) -> int:
        """Total on-disk size of the block, header and checksums included."""
        return BLOCK_HEADER_SIZE + self.on_disk_size_without_header


def num_checksum_bytes(data_size_with_header: int, bytes_per_checksum: int) -> int:
    return CHECKSUM_SIZE * math.ceil(data_size_with_header / bytes_per_checksum)


def parse_header(buf: bytes | memoryview, pos: int, path: str, file_offset: int) -> BlockHeader:
    if len(buf) - pos < BLOCK_HEADER_SIZE:
        raise CorruptFileError(path, "truncated block header", file_offset)
    h = BlockHeader(*HEADER_STRUCT.unpack_from(buf, pos))
    if (
        h.on_disk_size_without_header < 0
        or h.uncompressed_size_without_header < 0
        or h.on_disk_data_size_with_header < BLOCK_HEADER_SIZE
        or h.on_disk_data_size_with_header > h.on_disk_size
    ):
        raise CorruptFileError(path, f"inconsistent sizes in block header {h}", file_offset)
    if h.checksum_type not in (CHECKSUM_NULL, CHECKSUM_CRC32, CHECKSUM_CRC32C):
        raise CorruptFileError(path, f"unknown checksum type {h.checksum_type}", file_offset)
    if h.checksum_type != CHECKSUM_NULL and h.bytes_per_checksum <= 0:
        raise CorruptFileError(path, f"invalid bytesPerChecksum {h.bytes_per_checksum}", file_offset)
    return h


def _verify_checksums(
    block: memoryview, h: BlockHeader, path: str, file_offset: int
) -> None:
    data_end = h.on_disk_data_size_with_header
    bpc = h.bytes_per_checksum
    n = math.ceil(data_end / bpc)
    stored = block[data_end : data_end + CHECKSUM_SIZE * n]
    if len(stored) < CHECKSUM_SIZE * n:
        raise CorruptFileError(path, "block checksums are truncated", file_offset)
    crc = google_crc32c.value if h.checksum_type == CHECKSUM_CRC32C else zlib.crc32
    for i in range(n):
        chunk = block[i * bpc : min((i + 1) * bpc, data_end)]
        want = int.from_bytes(stored[i * 4 : i * 4 + 4], "big")
        got = crc(bytes(chunk)) & 0xFFFFFFFF
        if got != want:
            kind = "CRC32C" if h.checksum_type == CHECKSUM_CRC32C else "CRC32"
            raise CorruptFileError(
                path,
                f"{kind} checksum mismatch in {h.magic.decode('latin-1')} block, bytes "
                f"{file_offset + i * bpc}..{file_offset + i * bpc + len(chunk)} "
                f"(stored {want:08x}, computed {got:08x})",
                file_offset,
            )


def decode_block(
    buf: bytes | memoryview,
    pos: int,
    codec: int,
    path: str,
    file_offset: int,
    expect_magic: bytes | tuple[bytes, ...] | None = None,
    verify_checksums: bool = True,
) -> tuple[BlockHeader, bytes]:
    """Decode the block starting at ``buf[pos]`` (file offset ``file_offset``); returns (header, payload)."""
    mv = memoryview(buf)
    h = parse_header(mv, pos, path, file_offset)
    if expect_magic is not None:
        wanted = (expect_magic,) if isinstance(expect_magic, bytes) else expect_magic
        if h.magic not in wanted:
            raise CorruptFileError(
                path,
                f"expected a {' or '.join(m.decode('latin-1') for m in wanted)} block, found magic {h.magic!r}",
                file_offset,
            )
    end = pos + h.on_disk_size
    if end > len(mv):
        raise CorruptFileError(
            path, f"block of {h.on_disk_size} bytes is truncated ({len(mv) - pos} bytes available)", file_offset
        )
    block = mv[pos:end]
    if verify_checksums and h.checksum_type != CHECKSUM_NULL:
        _verify_checksums(block, h, path, file_offset)
    try:
        payload = decompress(
            codec, block[BLOCK_HEADER_SIZE : h.on_disk_data_size_with_header], h.uncompressed_size_without_header
        )
    except ValueError as e:
        raise CorruptFileError(path, f"{h.magic.decode('latin-1')} block payload: {e}", file_offset) from None
    return h, payload


# gzip header (RFC 1952): FLG is byte 3, the optional fields start after the 10 fixed bytes
_GZIP_FLG = 3
_GZIP_FIXED = 10
_GZIP_FHCRC = 0x02
_GZIP_FEXTRA = 0x04
_GZIP_SUBFIELD_ID = b"PY"  # the one FEXTRA subfield we write: zero bytes that only set the member's length


def readers_checksum_bytes(data_size_with_header: int, bytes_per_checksum: int) -> int:
    """The checksum bytes Hudi's readers assume a block has: they count chunks over the on-disk size *with* the
    checksums (``33 + onDiskSizeWithoutHeader``), not over the checksummed bytes."""
    own = num_checksum_bytes(data_size_with_header, bytes_per_checksum)
    return num_checksum_bytes(data_size_with_header + own, bytes_per_checksum)


def _gzip_clear_of_chunk_edge(member: bytes) -> bytes:
    """``member`` (one gzip member, a GZ block payload), lengthened by an FEXTRA field when its block would end
    within a few bytes below a checksum-chunk edge.

    There, counting chunks over the size with the checksums gives one chunk more than the block has, and hudi-rs,
    which cuts the payload at ``33 + onDiskSizeWithoutHeader - that count``, loses the member's last 4 bytes
    ("GZIP decompression failed: unexpected end of file"; Java's reader inflates to the member's own end and
    is not affected). A member that long is never cut: the padded block starts a new chunk with room to spare.
    Every gzip reader skips FEXTRA; the payload and all header invariants are unchanged."""
    size = BLOCK_HEADER_SIZE + len(member)
    own = num_checksum_bytes(size, BYTES_PER_CHECKSUM)
    if readers_checksum_bytes(size, BYTES_PER_CHECKSUM) == own:
        return member
    if member[_GZIP_FLG] & (_GZIP_FEXTRA | _GZIP_FHCRC):
        raise ValueError("gzip member already has an FEXTRA field or a header CRC")
    chunks = own // CHECKSUM_SIZE
    pad = max(chunks * BYTES_PER_CHECKSUM + 1 - size, 6)  # 2 (XLEN) + 4 (subfield id and length) at least
    body = pad - 6
    extra = struct.pack("<H", pad - 2) + _GZIP_SUBFIELD_ID + struct.pack("<H", body) + b"\x00" * body
    flags = bytes([member[_GZIP_FLG] | _GZIP_FEXTRA])
    return member[:_GZIP_FLG] + flags + member[_GZIP_FLG + 1 : _GZIP_FIXED] + extra + member[_GZIP_FIXED:]


def encode_block(
    magic: bytes, payload: bytes | memoryview, codec: int, prev_offset: int = -1, level: int | None = None
) -> bytes:
    """A block as Hudi's native writer makes it: NULL checksum type, zeroed checksum slots reserved.
    ``level``: the GZ compression level (None: the codec's default)."""
    data = compress(codec, payload, level)
    if codec == CODEC_GZ:
        data = _gzip_clear_of_chunk_edge(data)
    data_size_with_header = BLOCK_HEADER_SIZE + len(data)
    n_cs = num_checksum_bytes(data_size_with_header, BYTES_PER_CHECKSUM)
    header = HEADER_STRUCT.pack(
        magic,
        len(data) + n_cs,
        len(payload),
        prev_offset,
        CHECKSUM_NULL,
        BYTES_PER_CHECKSUM,
        data_size_with_header,
    )
    return header + data + b"\x00" * n_cs


def read_root_index(payload: bytes, count: int, path: str, offset: int) -> list[tuple[int, int, bytes]]:
    """Entries (offset, size, key) of a root index block; ``count`` comes from the trailer."""
    out = []
    pos = 0
    n = len(payload)
    try:
        for _ in range(count):
            off, size = struct.unpack_from(">qi", payload, pos)
            pos += 12
            klen, vs = decode_hadoop_vint(payload, pos)
            pos += vs
            if klen < 0 or pos + klen > n:
                raise ValueError("index key runs past the block")
            out.append((off, size, bytes(payload[pos : pos + klen])))
            pos += klen
    except (struct.error, IndexError, ValueError) as e:
        raise CorruptFileError(path, f"malformed root index block: {e}", offset) from None
    return out


def read_nonroot_index(payload: bytes, path: str, offset: int) -> list[tuple[int, int, bytes]]:
    """Entries of a leaf or intermediate index block (count and secondary index inside the block)."""
    try:
        (n,) = struct.unpack_from(">i", payload, 0)
        if n < 0 or 4 + 4 * (n + 1) > len(payload):
            raise ValueError(f"bad entry count {n}")
        secondary = struct.unpack_from(f">{n + 1}i", payload, 4)
        base = 4 + 4 * (n + 1)
        out = []
        for i in range(n):
            s, e = base + secondary[i], base + secondary[i + 1]
            if not (base <= s and s + 12 <= e <= len(payload)):
                raise ValueError(f"entry {i} out of bounds")
            off, size = struct.unpack_from(">qi", payload, s)
            out.append((off, size, bytes(payload[s + 12 : e])))
    except (struct.error, ValueError) as e:
        raise CorruptFileError(path, f"malformed non-root index block: {e}", offset) from None
    return out


def encode_root_index(entries: list[tuple[int, int, bytes]]) -> bytes:
    return b"".join(struct.pack(">qi", off, size) + encode_hadoop_vint(len(k)) + k for off, size, k in entries)
