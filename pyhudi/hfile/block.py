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
from pyhudi.io.compression import compress, decompress


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


def encode_block(
    magic: bytes, payload: bytes | memoryview, codec: int, prev_offset: int = -1, level: int | None = None
) -> bytes:
    """A block as Hudi's native writer makes it: NULL checksum type, zeroed checksum slots reserved.
    ``level``: the GZ compression level (None: the codec's default)."""
    data = compress(codec, payload, level)
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
