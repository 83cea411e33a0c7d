"""A storage rooted at a table refuses every path outside it: ``..`` segments, absolute paths elsewhere,
symbolic links leading out, the root itself for deletes and moves; the root survives pickling into tasks."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from pyhudi.errors import StorageError, UnsafePathError
from pyhudi.io.storage import Storage


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Storage, Path, Path]:
    """(storage rooted at <tmp>/t, the table folder, a file beside the table that must never be touched)."""
    table = tmp_path / "t"
    (table / "p").mkdir(parents=True)
    (table / "p" / "f.parquet").write_bytes(b"data")
    outside = tmp_path / "secret"
    outside.write_bytes(b"keep")
    storage, path = Storage.from_uri(str(table))
    return storage.rooted(path), table, outside


def _ops(storage: Storage, path: str) -> list[tuple[str, object]]:
    return [
        ("write_bytes", lambda: storage.write_bytes(path, b"x")),
        ("open_output", lambda: storage.open_output(path)),
        ("open_append", lambda: storage.open_append(path)),
        ("delete", lambda: storage.delete(path)),
        ("makedirs", lambda: storage.makedirs(path)),
        ("move from", lambda: storage.move(path, path + ".moved")),
        ("read_bytes", lambda: storage.read_bytes(path)),
        ("open_input", lambda: storage.open_input(path)),
        ("list", lambda: storage.list(path)),
        ("exists", lambda: storage.exists(path)),
        ("status", lambda: storage.status(path)),
    ]


def _outside_paths(table: Path, outside: Path) -> list[str]:
    t = str(table)
    return [
        str(outside),  # absolute, elsewhere
        f"{t}/../secret",  # a '..' segment
        f"{t}/p/../../secret",
        f"{t}/..",
        f"{t}2/x",  # shares the root as a string prefix, not as a folder
        str(table.parent),
        "/",
        f"{t}/p/\x00x",
    ]


def test_rooted_storage_refuses_every_operation_outside(layout: tuple[Storage, Path, Path]) -> None:
    storage, table, outside = layout
    for path in _outside_paths(table, outside):
        for name, op in _ops(storage, path):
            with pytest.raises(UnsafePathError) as info:
                op()  # type: ignore[operator]
            assert repr(path) in str(info.value) and repr(str(table)) in str(info.value), (name, str(info.value))
    assert outside.read_bytes() == b"keep"
    assert sorted(p.name for p in table.parent.iterdir()) == ["secret", "t"]


def test_rooted_storage_works_inside(layout: tuple[Storage, Path, Path]) -> None:
    storage, table, _ = layout
    t = str(table)
    storage.write_bytes(f"{t}/q/new.bin", b"abc")
    assert storage.read_bytes(f"{t}/q/new.bin") == b"abc"
    assert storage.read_bytes(f"{t}/./q//new.bin") == b"abc"  # normalised inside: fine
    storage.write_bytes(f"{t}/q/parts.bin", [b"ab", b"", b"cde"])  # a file written from its parts, in order
    assert storage.read_bytes(f"{t}/q/parts.bin") == b"abcde"
    storage.delete(f"{t}/q/parts.bin")
    with storage.open_append(f"{t}/q/new.bin") as out:
        out.write(b"d")
    storage.move(f"{t}/q/new.bin", f"{t}/q/moved.bin")
    assert [s.name for s in storage.list(f"{t}/q")] == ["moved.bin"]
    assert storage.exists(t) and storage.is_dir(t)
    storage.makedirs(t)
    storage.delete(f"{t}/q")
    assert not (table / "q").exists()


def test_the_root_itself_is_never_deleted_or_moved(layout: tuple[Storage, Path, Path]) -> None:
    storage, table, _ = layout
    for op in (lambda: storage.delete(str(table)), lambda: storage.delete(str(table) + "/"),
               lambda: storage.move(str(table), str(table) + "/x")):
        with pytest.raises(UnsafePathError, match="the table's own folder"):
            op()
    assert (table / "p" / "f.parquet").exists()


def test_delete_files_only(layout: tuple[Storage, Path, Path]) -> None:
    storage, table, _ = layout
    with pytest.raises(StorageError, match="it is a folder, not a file"):
        storage.delete(str(table / "p"), dirs=False)
    assert (table / "p" / "f.parquet").exists()


def test_symbolic_links_out_of_the_table_are_refused(layout: tuple[Storage, Path, Path]) -> None:
    storage, table, outside = layout
    (table / "link_dir").symlink_to(outside.parent, target_is_directory=True)
    (table / "p" / "link_file").symlink_to(outside)
    for path in [f"{table}/link_dir/secret", f"{table}/link_dir/new", f"{table}/p/link_file", f"{table}/link_dir"]:
        for _name, op in _ops(storage, path):
            with pytest.raises(UnsafePathError, match="symbolic link"):
                op()  # type: ignore[operator]
    assert outside.read_bytes() == b"keep"
    assert (table / "p" / "link_file").is_symlink() and (table / "link_dir").is_symlink()


def test_reads_resolve_each_file_after_its_folder_was_resolved(layout: tuple[Storage, Path, Path]) -> None:
    """A read remembers its folder's real path; the file itself is still looked at on every read: a file that
    became a symbolic link out of the table is refused, in a folder read from before."""
    storage, table, outside = layout
    (table / "p" / "g.parquet").write_bytes(b"inside")
    assert storage.read_bytes(f"{table}/p/g.parquet") == b"inside"
    (table / "p" / "g.parquet").unlink()
    (table / "p" / "g.parquet").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        storage.read_bytes(f"{table}/p/g.parquet")
    (table / "p" / "h.parquet").symlink_to(table / "p" / "f.parquet")  # a link inside the table is fine
    assert storage.read_bytes(f"{table}/p/h.parquet") == (table / "p" / "f.parquet").read_bytes()


def test_a_symlinked_table_root_still_works(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real, target_is_directory=True)
    storage = Storage(pafs.LocalFileSystem()).rooted(str(tmp_path / "alias"))
    storage.write_bytes(f"{tmp_path}/alias/p/x", b"1")
    assert (real / "p" / "x").read_bytes() == b"1"


def test_root_survives_pickling_and_only_narrows(layout: tuple[Storage, Path, Path]) -> None:
    storage, table, outside = layout
    clone = pickle.loads(pickle.dumps(storage))
    assert clone.root == str(table)
    with pytest.raises(UnsafePathError):
        clone.write_bytes(str(outside), b"x")
    inner = storage.rooted(f"{table}/p")
    assert inner.root == f"{table}/p"
    with pytest.raises(UnsafePathError):
        inner.exists(f"{table}/other")
    with pytest.raises(UnsafePathError):
        storage.rooted(str(table.parent))  # widening is refused
    assert storage.rooted(str(table) + "/") is storage
    assert Storage(pafs.LocalFileSystem()).root is None


def test_unrooted_storage_is_unchanged(tmp_path: Path) -> None:
    storage = Storage(pafs.LocalFileSystem())
    storage.write_bytes(str(tmp_path / "a" / ".." / "b"), b"1")
    assert (tmp_path / "b").read_bytes() == b"1"


def test_object_store_style_paths(tmp_path: Path) -> None:
    """Paths without a leading slash (bucket/key) are checked the same way."""
    (tmp_path / "bucket" / "t" / "p").mkdir(parents=True)  # an object store needs no folders; this stand-in does
    storage = Storage(pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())).rooted("bucket/t")
    assert not storage.is_local
    storage.write_bytes("bucket/t/p/x", b"1")
    for bad in ["bucket/t/../u/x", "bucket/u/x", "bucket/tt/x", "other/t/x", "bucket"]:
        with pytest.raises(UnsafePathError):
            storage.write_bytes(bad, b"1")
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()) == ["bucket/t/p/x"]
    assert os.path.isdir(tmp_path / "bucket" / "t")


class _RacingFs:
    """A file system where another process deletes the folder between the look and the delete."""

    def __init__(self, fs: pafs.FileSystem) -> None:
        self._fs = fs

    def __getattr__(self, name: str) -> object:
        return getattr(self._fs, name)

    def delete_dir(self, path: str) -> None:
        self._fs.delete_dir(path)
        raise FileNotFoundError(f"Cannot delete directory '{path}'")


def test_delete_of_a_folder_another_process_deleted_meanwhile(tmp_path: Path) -> None:
    """Two writers may delete the same finished marker folder; the one that finds it gone is not failed by it
    (its commit has completed)."""
    (tmp_path / "t" / "m").mkdir(parents=True)
    storage, path = Storage.from_uri(str(tmp_path / "t"))
    storage.fs = _RacingFs(storage.fs)  # type: ignore[assignment]
    storage.delete(f"{path}/m")
    assert not (tmp_path / "t" / "m").exists()
    (tmp_path / "t" / "m").mkdir()
    with pytest.raises(StorageError, match="file not found"):
        storage.delete(f"{path}/m", missing_ok=False)


def test_paths_as_other_programs_name_them() -> None:
    """The full paths Hudi records in plans: a local path as it is, an object store's with its scheme (a bare
    ``bucket/key`` is a relative path to a Java reader)."""
    assert Storage(pafs.LocalFileSystem()).uri("/w/t/a/f.parquet") == "/w/t/a/f.parquet"
    s3 = Storage(pafs.S3FileSystem(anonymous=True, region="us-east-1", endpoint_override="127.0.0.1:1"))
    assert s3.uri("bucket/t/a/f.parquet") == "s3://bucket/t/a/f.parquet"
    gcs = Storage(pafs.GcsFileSystem(anonymous=True))
    assert gcs.uri("bucket/t/a/f.parquet") == "gs://bucket/t/a/f.parquet"  # Hadoop's and Hudi's scheme
