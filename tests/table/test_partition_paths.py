"""Partition paths made from record values stay inside the table (pyhudi.table.partition_path), and names read
back from a table's files are checked before use (pyhudi.table.recorded_paths)."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pytest

from pyhudi.errors import CorruptFileError, InvalidInputError
from pyhudi.table.keygen import KeyGenerator
from pyhudi.table.partition_path import (
    MAX_PATH_BYTES,
    MAX_SEGMENT_BYTES,
    check_file_name,
    check_partition_path,
    nested_partitions,
    partition_path_problem,
    shown,
    unsafe_mask,
)
from pyhudi.table.recorded_paths import (
    clean_targets,
    compaction_operations,
    rollback_targets,
    write_stat_path,
)

URLENCODE = "hoodie.datasource.write.partitionpath.urlencode"
HIVE = "hoodie.datasource.write.hive_style_partitioning"
T = "20260101000000000"
BASE = f"f1-0_0-1-1_{T}.parquet"
LOG = f".f1-0_{T}.log.1_0-1-1"


def kg(pp: str = "p", *, hive: bool = False, enc: bool = False) -> KeyGenerator:
    return KeyGenerator.from_options({
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": pp,
        HIVE: str(hive).lower(),
        URLENCODE: str(enc).lower(),
    })


def paths(g: KeyGenerator, values: list, col: str = "p") -> list[str]:
    return g.partition_paths(pa.table({"id": [str(i) for i in range(len(values))], col: pa.array(values, pa.string())})).to_pylist()


# -- the rules, one path at a time -----------------------------------------------------------------------------
SAFE = ["x", "2026/11/21", "p=..", "p=.", "...", "a.b", "a..b", "..a", "é/ü", "a b", "p=/x", "__HIVE_DEFAULT_PARTITION__",
        "a" * MAX_SEGMENT_BYTES, "/".join(["a" * 200] * 5)]
UNSAFE = {
    "": "is empty",
    "/abs": "is absolute",
    "a//b": "has an empty segment",
    "a/": "has an empty segment",
    ".": "has a '.' segment",
    "..": "has a '..' segment",
    "../x": "has a '..' segment",
    "a/../../b": "has a '..' segment",
    "a/./b": "has a '.' segment",
    ".hoodie": "starting with '.hoodie'",
    "a/.hoodie_partition_metadata": "starting with '.hoodie'",
    "..\\x": "contains a backslash",
    "a\x00b": "contains a NUL character",
    "a\nb": "control character U+000A",
    "a\x7fb": "control character U+007F",
    "x" * (MAX_SEGMENT_BYTES + 1): f"segment of {MAX_SEGMENT_BYTES + 1} bytes",
    "é" * 128: "segment of 256 bytes",  # 128 characters, 256 bytes in UTF-8
    "/".join(["a" * 250] * 5): f"is 1254 bytes long (at most {MAX_PATH_BYTES}",
}


@pytest.mark.parametrize("path", SAFE)
def test_safe_paths(path: str) -> None:
    assert partition_path_problem(path) is None


@pytest.mark.parametrize("path", list(UNSAFE))
def test_unsafe_paths_and_why(path: str) -> None:
    problem = partition_path_problem(path)
    assert problem is not None and UNSAFE[path] in problem, problem


def test_vectorised_mask_agrees_with_the_rules() -> None:
    cases = SAFE + [p for p in UNSAFE if len(p.encode()) <= MAX_PATH_BYTES]  # the total length is checked apart
    got = unsafe_mask(pa.array(cases, pa.string()))
    want = np.array([partition_path_problem(p) is not None for p in cases])
    assert got.tolist() == want.tolist()
    assert unsafe_mask(pa.array([], pa.string())).tolist() == []


def test_read_side_rules_are_structural() -> None:
    """Names read back from a table: "" is the table's root; long names and control characters (another writer
    may have used them) pass; anything leading out does not, with a backslash separating segments too."""
    for ok in ["", "a", "2026/11/21", "x" * 1000, "a\tb", "p=.."]:
        assert check_partition_path(ok, "src") == ok
    for bad in ["..", "../x", "a/../b", "/abs", "\\abs", "a//b", ".", "a\\..\\b", "..\\x", "a\x00", ".hoodie/timeline"]:
        with pytest.raises(CorruptFileError, match=r"^src: partition path"):
            check_partition_path(bad, "src")


def test_file_names_must_be_bare() -> None:
    assert check_file_name(BASE, "src") == BASE
    for bad in ["", ".", "..", "a/b", "../x", "a\\b", "a\x00"]:
        with pytest.raises(CorruptFileError, match=r"^src: "):
            check_file_name(bad, "src")


def test_shown_values_are_short_and_safe_to_print() -> None:
    assert shown("a\nb\x1b[31m") == "'a\\nb\\x1b[31m'"
    long = shown("x" * 1000)
    assert long.endswith("... (1000 characters)") and len(long) < 110
    assert "\n" not in shown("\n" * 500)


# -- the key generator refuses unsafe values, with a clear message ----------------------------------------------
BAD_VALUES = ["../x", "a/../../b", "..", ".", "/abs/path", "..\\x", "a\x00b", "x" * 1000]


@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("style", ["plain", "hive", "multi", "multi_hive"])
def test_keygen_refuses_or_encodes(value: str, style: str) -> None:
    hive = style.endswith("hive")
    pp = "p,q" if style.startswith("multi") else "p"
    values = ["ok", value, "ok"]
    table = pa.table({"id": ["1", "2", "3"], "p": values, "q": ["z", "z", "z"]})
    for enc in (False, True):
        g = kg(pp, hive=hive, enc=enc)
        try:
            got = g.partition_paths(table).to_pylist()
        except InvalidInputError as e:
            msg = str(e)
            assert msg.startswith("partition column 'p' has the value "), msg
            assert shown(value) in msg and "\n" not in msg and "\x00" not in msg
            if enc or value in (".", "..") or len(value) == 1000:
                assert URLENCODE + "=true" not in msg  # url-encoding would not help
            else:
                assert URLENCODE + "=true" in msg
            continue
        # accepted: then every path is safe (and the value was made safe by hive style or url-encoding)
        assert all(partition_path_problem(p) is None for p in got), got
        assert hive or enc


def test_keygen_accepts_what_hudi_users_rely_on() -> None:
    assert paths(kg(), ["2026/11/21", "eu", None, ""]) == ["2026/11/21", "eu", "__HIVE_DEFAULT_PARTITION__",
                                                         "__HIVE_DEFAULT_PARTITION__"]
    assert paths(kg(hive=True), [".."]) == ["p=.."]
    assert paths(kg(enc=True), ["../x", "/abs", "a\x00b", "a\\b"]) == ["..%2Fx", "%2Fabs", "a%00b", "a%5Cb"]


def test_keygen_error_names_first_bad_row_and_column() -> None:
    g = kg("p,q")
    t = pa.table({"id": ["1", "2", "3"], "p": ["a", "b", "c"], "q": ["z", "..", "/y"]})
    with pytest.raises(InvalidInputError, match=r"^partition column 'q' has the value '\.\.', which makes the "
                                                r"partition path '\.\.' that has a '\.\.' segment; a table created "
                                                r"with hoodie\.datasource\.write\.hive_style_partitioning=true"):
        g.partition_paths(t)


def test_keygen_refuses_a_too_long_multi_field_path() -> None:
    g = kg("p,q,r,s,t")
    v = "a" * 250
    t = pa.table({"id": ["1"], **{c: [v] for c in "pqrst"}})
    with pytest.raises(InvalidInputError, match=re.escape("partition column(s) ['p', 'q', 'r', 's', 't'] make the "
                                                          "partition path")):
        g.partition_paths(t)


# -- names recorded in plans and commit metadata ----------------------------------------------------------------
def _rollback_plan(partition: str, *files: str) -> dict:
    return {"instantToRollback": {"commitTime": T, "action": "commit"},
            "RollbackRequests": [{"partitionPath": partition, "filesToBeDeleted": list(files)}]}


def test_rollback_targets() -> None:
    assert rollback_targets(_rollback_plan("a/b", f"/x/y/a/b/{BASE}", LOG), "plan") == [("a/b", [BASE, LOG])]
    assert rollback_targets(_rollback_plan("", f"file:/w/t/{BASE}"), "plan") == [("", [BASE])]


@pytest.mark.parametrize(("plan", "pattern"), [
    (_rollback_plan("../..", BASE), r"rollback partition '\.\./\.\.' has a '\.\.' segment"),
    (_rollback_plan("/etc", BASE), "rollback partition '/etc' is absolute"),
    (_rollback_plan("a", "../../etc/passwd"), r"does not name a Hudi data file"),
    (_rollback_plan("a", "/t/a/"), r"file to delete '' is empty"),
    (_rollback_plan("a", "/t/a/.."), r"file to delete '\.\.' is '\.\.'"),
    (_rollback_plan("a", "f1-0_0-1-1_20250101000000000.parquet"), "was written by instant 20250101000000000, not by"),
    ({"instantToRollback": {"commitTime": "../x"}, "RollbackRequests": []}, "no valid instant"),
])
def test_rollback_targets_refuse_crafted_plans(plan: dict, pattern: str) -> None:
    with pytest.raises(CorruptFileError, match=r"^/t/\.hoodie/timeline/r\.rollback\.requested: .*" + pattern):
        rollback_targets(plan, "/t/.hoodie/timeline/r.rollback.requested")


def test_clean_targets() -> None:
    plan = {"filePathsToBeDeletedPerPartition": {"a": [{"filePath": f"/t/a/{BASE}"}], "": [{"filePath": LOG}]}}
    assert clean_targets(plan, "plan") == {"a": [BASE], "": [LOG]}
    for partition, fp, pattern in [("../x", BASE, "clean partition"), ("a", "/t/a/", "is empty"),
                                   ("a", "/etc/passwd", "does not name a Hudi data file")]:
        with pytest.raises(CorruptFileError, match=f"^plan: .*{pattern}"):
            clean_targets({"filePathsToBeDeletedPerPartition": {partition: [{"filePath": fp}]}}, "plan")


def test_write_stat_path() -> None:
    assert write_stat_path("a/b", {"path": f"a/b/{BASE}"}, "c") == f"a/b/{BASE}"
    assert write_stat_path("", {"path": BASE}, "c") == BASE
    for part, path, pattern in [("a", f"../../{BASE}", "does not lie in its partition"),
                                ("..", f"../{BASE}", "has a '..' segment"),
                                ("a", "a/..", "is '..'"), ("a", "a/", "is empty"), ("a", None, "has no file path")]:
        with pytest.raises(CorruptFileError, match=f"^c: .*{re.escape(pattern)}"):
            write_stat_path(part, {"path": path}, "c")


def _compaction_op(partition: str = "a", fid: str = "f1-0", base: str | None = BASE, logs: tuple[str, ...] = (LOG,),
                   base_t: str = T) -> dict:
    return {"operations": [{"partitionPath": partition, "fileId": fid, "dataFilePath": base,
                            "deltaFilePaths": list(logs), "baseInstantTime": base_t, "metrics": {}}]}


def test_compaction_operations() -> None:
    [op] = compaction_operations(_compaction_op(base=f"/t/a/{BASE}"), "plan")
    assert (op["partitionPath"], op["fileId"], op["dataFilePath"], op["deltaFilePaths"]) == ("a", "f1-0", BASE, [LOG])
    [op] = compaction_operations(_compaction_op("", base=None), "plan")
    assert op["partitionPath"] == "" and op["dataFilePath"] is None


@pytest.mark.parametrize(("plan", "pattern"), [
    (_compaction_op(".hoodie/metadata/files"), "compaction partition '.hoodie/metadata/files' has a segment starting "
                                               "with '.hoodie'"),
    (_compaction_op("../x"), "compaction partition '../x' has a '..' segment"),
    (_compaction_op(fid="../f1-0"), "compaction file id '../f1-0' is a path"),
    (_compaction_op(fid="f1_0"), "compaction file id 'f1_0' is not a Hudi file id"),
    (_compaction_op(fid=None), "compaction file id None is not a Hudi file id"),  # type: ignore[arg-type]
    (_compaction_op(base="../../etc/passwd"), "compaction base file '../../etc/passwd' does not name a Hudi data file"),
    (_compaction_op(base=LOG), f"compaction base file '{LOG}' is not a base file"),
    (_compaction_op(logs=(BASE,)), f"compaction log file '{BASE}' is not a log file"),
    (_compaction_op(fid="f2-0"), f"compaction of file group 'f2-0' names '{BASE}', a file of another file group"),
    (_compaction_op(base_t="x"), "has no valid base instant"),
])
def test_compaction_operations_refuse_crafted_plans(plan: dict, pattern: str) -> None:
    with pytest.raises(CorruptFileError, match="^plan: .*" + re.escape(pattern)):
        compaction_operations(plan, "plan")


def test_nested_partitions() -> None:
    assert nested_partitions(["2026/11", "2026/12", "2026/11/21"]) == ("2026/11", "2026/11/21")
    assert nested_partitions(["a", "ab/c", "a b"]) is None  # a prefix of the text only, not a folder inside
    assert nested_partitions(["", "a", "b/c"]) is None  # a non-partitioned table's root is no partition
