"""Partition paths come from record values: the rules that keep them, and every name read back, inside the table.

A partition path is relative to the table's base path: segments joined by ``/`` (``2026/11/21``, ``region=eu``,
``eu/q`` for two partition fields). A write checks every partition path it produces (vectorised, on the Arrow
batches of the prepare stage, before the write's instant or any file exists) and refuses a path that

1. is empty or absolute (starts with ``/``), or has an empty segment (``a//b``, a trailing ``/``);
2. has a ``.`` or ``..`` segment (Hudi's own ``PartitionPathEncodeUtils.validateNoPathTraversal`` refuses ``..``
   too);
3. has a segment starting with ``.hoodie`` (the table's metadata folder, the partition metafile): data written
   there would be lost to readers and could corrupt the timeline or the metadata table;
4. contains a backslash (a separator on Windows and in some object-store tools), a NUL or another control
   character (U+0001-U+001F, U+007F: they break line-based files such as Hudi's marker lists, and terminals);
5. has a segment longer than :data:`MAX_SEGMENT_BYTES` (255) bytes in UTF-8: the longest file name of ext4, XFS,
   APFS and HDFS (``dfs.namenode.fs-limits.max-component-length``);
6. is longer than :data:`MAX_PATH_BYTES` (1024) bytes in UTF-8: the longest object key of S3 and GCS, well under
   Hudi's own limit (the metadata table's ``files`` partition keys its records by partition path in HFile cells
   whose row length is a 2-byte signed short: 32767 bytes).

``hoodie.datasource.write.partitionpath.urlencode=true`` escapes ``/``, ``\\`` and control characters (Hive's
``escapePathName``), so such values become safe single-segment names, but it keeps ``.``: a value ``.`` or ``..``
stays refused. Hive-style partitioning names a folder ``field=value``, so ``p=..`` is a safe segment. Null and
empty values become ``__HIVE_DEFAULT_PARTITION__`` before the check.

Names read back from a table's own files (metadata-table records, rollback, clean and compaction plans, markers, commit
metadata) are checked with the structural rules only (1-3 and NUL; a backslash counts as a separator when
looking for ``..``), since other writers may have used longer names or control characters legitimately:
:func:`check_partition_path`, :func:`check_file_name`. Errors name the file that carried the bad name.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.config import HIVE_STYLE_PARTITIONING, URL_ENCODE_PARTITIONING
from pyhudi.errors import CorruptFileError, InvalidInputError

DEFAULT_PARTITION_PATH = "__HIVE_DEFAULT_PARTITION__"  # what a null or empty partition value becomes

# Hive's FileUtils.escapePathName escapes these (all < 128).
_ESCAPED = frozenset(
    [
        *(chr(c) for c in range(0x20)),
        '"',
        "#",
        "%",
        "'",
        "*",
        "/",
        ":",
        "=",
        "?",
        "\\",
        "\x7f",
        "{",
        "[",
        "]",
        "^",
    ]
)
_ESCAPE_REGEX = "[\\x00-\\x1f\"#%'*/:=?\\\\\\x7f{\\[\\]^]"


METAFOLDER_PREFIX = ".hoodie"
MAX_SEGMENT_BYTES = 255
MAX_PATH_BYTES = 1024
SHOWN_CHARS = 80

# rules 1-4 of a partition path (or of one partition field's part of it), as one RE2 pattern
_UNSAFE_REGEX = r"^/|/$|//|(^|/)\.\.?(/|$)|(^|/)\.hoodie|[\x00-\x1f\x7f\\]"


# -- messages -------------------------------------------------------------------------------------------------
def shown(value: str, limit: int = SHOWN_CHARS) -> str:
    """``value`` quoted for a message: at most ``limit`` characters, control and other unprintable characters
    escaped, on one line."""
    text = repr(value[:limit])
    return text + f"... ({len(value)} characters)" if len(value) > limit else text


# -- the rules, one path at a time ----------------------------------------------------------------------------
def _segments(path: str, backslash_separates: bool) -> list[str]:
    return (path.replace("\\", "/") if backslash_separates else path).split("/")


def partition_path_problem(path: str, *, strict: bool = True) -> str | None:
    """Why ``path`` is not a safe partition path, as the end of a sentence (None: it is safe).

    ``strict``: the rules a write enforces (1-6); otherwise the structural ones for names read back (1-3, NUL,
    with a backslash also separating segments), where ``""`` (a non-partitioned table's root) is allowed.
    """
    if path == "":
        return "is empty" if strict else None
    if "\x00" in path:
        return "contains a NUL character"
    if path.startswith("/") or (not strict and path.startswith("\\")):
        return "is absolute"
    segments = _segments(path, backslash_separates=not strict)
    for seg in segments:
        if seg == "":
            return "has an empty segment"
        if seg in (".", ".."):
            return f"has a {seg!r} segment"
        if seg.startswith(METAFOLDER_PREFIX):
            return f"has a segment starting with {METAFOLDER_PREFIX!r} (reserved for the table's metadata)"
    if not strict:
        return None
    if "\\" in path:
        return "contains a backslash"
    for ch in path:
        if ord(ch) < 0x20 or ord(ch) == 0x7F:
            return f"contains the control character U+{ord(ch):04X}"
    for seg in segments:
        n = len(seg.encode("utf-8"))
        if n > MAX_SEGMENT_BYTES:
            return f"has a segment of {n} bytes (at most {MAX_SEGMENT_BYTES}, the longest name file systems accept)"
    n = len(path.encode("utf-8"))
    if n > MAX_PATH_BYTES:
        return f"is {n} bytes long (at most {MAX_PATH_BYTES}, the longest object key of S3 and GCS)"
    return None


def check_partition_path(path: str, source: str, what: str = "partition path") -> str:
    """``path`` if it is a safe relative partition path as read from a table's file (``""`` allowed);
    CorruptFileError naming ``source`` (the file that carried it) otherwise."""
    if not isinstance(path, str):
        raise CorruptFileError(source, f"{what} {path!r} is not a string")
    problem = partition_path_problem(path, strict=False)
    if problem is not None:
        raise CorruptFileError(source, f"{what} {shown(path)} {problem}: it would lead outside the table's data")
    return path


def file_name_problem(name: str) -> str | None:
    """Why ``name`` is not a bare file name (None: it is)."""
    if name == "":
        return "is empty"
    if name in (".", ".."):
        return f"is {name!r}"
    if "/" in name or "\\" in name:
        return "is a path, not a bare file name"
    if "\x00" in name:
        return "contains a NUL character"
    return None


def check_file_name(name: str, source: str, what: str = "file name") -> str:
    """``name`` if it is a bare file name (no separator, not ``.``/``..``); CorruptFileError naming ``source``."""
    if not isinstance(name, str):
        raise CorruptFileError(source, f"{what} {name!r} is not a string")
    problem = file_name_problem(name)
    if problem is not None:
        raise CorruptFileError(source, f"{what} {shown(name)} {problem}")
    return name


# -- the write-side check, vectorised -------------------------------------------------------------------------
def unsafe_mask(paths: pa.Array) -> np.ndarray:
    """Per row: does the partition path (or one field's part of it) break rules 1-5? (Nulls count as safe: the
    key generator replaces them before.)"""
    n = len(paths)
    if n == 0:
        return np.zeros(0, bool)
    bad = pc.or_(pc.match_substring_regex(paths, _UNSAFE_REGEX), pc.equal(paths, ""))
    mask = np.asarray(pc.fill_null(bad, False).to_numpy(zero_copy_only=False), dtype=bool)
    # a segment can only exceed the limit in a path that does: split only those
    nbytes = np.asarray(pc.fill_null(pc.binary_length(paths), 0).to_numpy(zero_copy_only=False))
    long_rows = np.flatnonzero(nbytes > MAX_SEGMENT_BYTES)
    if len(long_rows):
        lists = pc.split_pattern(paths.take(pa.array(long_rows)), "/")
        seg_bytes = np.asarray(pc.binary_length(pc.list_flatten(lists)).to_numpy(zero_copy_only=False))
        parents = np.asarray(pc.list_parent_indices(lists).to_numpy(zero_copy_only=False))
        mask[long_rows[np.unique(parents[seg_bytes > MAX_SEGMENT_BYTES])]] = True
    return mask


def render_partition_value(value: str | None, field: str, *, hive_style: bool, url_encode: bool) -> str:
    """One field's part of a partition path, as the key generator makes it (for messages and remedies)."""

    v = DEFAULT_PARTITION_PATH if not value else (escape_path_name(value) if url_encode else value)
    return f"{field}={v}" if hive_style else v


def _remedy(value: str | None, field: str, hive_style: bool, url_encode: bool) -> str:
    def safe(hive: bool, enc: bool) -> bool:
        return partition_path_problem(render_partition_value(value, field, hive_style=hive, url_encode=enc)) is None

    if not url_encode and safe(hive_style, True):
        return (f"a table created with {URL_ENCODE_PARTITIONING}=true stores such values url-encoded as safe "
                "folder names, as Hudi does")
    if not hive_style and safe(True, url_encode):
        return (f"a table created with {HIVE_STYLE_PARTITIONING}=true names the folder "
                f"{shown(f'{field}=' + (value or ''))}, a safe name")
    return "no option makes it a safe folder name: clean or remap the value before writing"


def check_partition_part(
    parts: pa.Array, values: pa.Array, field: str, *, hive_style: bool, url_encode: bool
) -> None:
    """InvalidInputError for the first row whose part of the partition path (``parts``, made from partition
    field ``field``'s ``values``) breaks rules 1-5; it names the column, the value, the rule and the option
    that makes the value legal, if one does."""
    mask = unsafe_mask(parts)
    if not mask.any():
        return
    i = int(np.flatnonzero(mask)[0])
    value = values[i].as_py()
    part = parts[i].as_py()
    problem = partition_path_problem(part) or "is not a safe folder name"
    raise InvalidInputError(
        f"partition column {field!r} has the value {shown(value if value is not None else '')}, which makes the "
        f"partition path {shown(part)} that {problem}; {_remedy(value, field, hive_style, url_encode)}"
    )


def check_partition_path_lengths(paths: pa.Array, fields: tuple[str, ...]) -> None:
    """InvalidInputError for the first partition path longer than :data:`MAX_PATH_BYTES` bytes (rule 6)."""
    if len(paths) == 0:
        return
    too_long = pc.fill_null(pc.greater(pc.binary_length(paths), MAX_PATH_BYTES), False)
    if not pc.any(too_long).as_py():
        return
    i = int(np.flatnonzero(np.asarray(too_long.to_numpy(zero_copy_only=False), dtype=bool))[0])
    path = paths[i].as_py()
    raise InvalidInputError(
        f"partition column(s) {list(fields)} make the partition path {shown(path)} that "
        f"{partition_path_problem(path) or 'is too long'}; no option makes it shorter: clean or remap the values "
        "before writing"
    )


def escape_path_name(value: str) -> str:
    """Hive/Hudi ``escapePathName`` of one value (no default-partition substitution)."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def escape_path_names(values: pa.Array) -> pa.Array:
    """Vectorised ``escapePathName``: only rows that need escaping go through Python."""
    if len(values) == 0:
        return values
    needs = pc.fill_null(pc.match_substring_regex(values, _ESCAPE_REGEX), False)
    if not pc.any(needs).as_py():
        return values
    idx = np.flatnonzero(np.asarray(needs.to_numpy(zero_copy_only=False), dtype=bool))
    py = values.to_pylist()
    for i in idx:
        py[i] = escape_path_name(py[i])
    return pa.array(py, pa.string())


def nested_partitions(paths: Iterable[str]) -> tuple[str, str] | None:
    """Two partition paths one of which lies inside the other (``2026/11`` and ``2026/11/21``), or None. Hudi's
    readers that list storage take a folder holding a partition's metafile for a partition and look no deeper, so
    without the metadata table the inner one's files are not read."""
    known = {p for p in paths if p}
    for p in sorted(known):
        parts = p.split("/")
        for i in range(1, len(parts)):
            outer = "/".join(parts[:i])
            if outer in known:
                return outer, p
    return None
