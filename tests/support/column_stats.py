"""Checks of a table's ``column_stats`` and ``partition_stats`` against its files."""

from __future__ import annotations

import posixpath
from collections.abc import Collection

from pyhudi.io.storage import Storage
from pyhudi.metadata.column_stats import (
    ColumnRange,
    column_stats_key,
    file_ranges,
    indexed_columns,
    partition_records,
)
from pyhudi.metadata.partitions import COLUMN_STATS, PARTITION_STATS
from pyhudi.metadata.reader import MetadataTableReader
from pyhudi.metadata.records import stats_sort_key
from pyhudi.table.schema import with_meta
from pyhudi.table.table import Table


def check_stats(base: str, *, exact_partitions: Collection[str] | None = None,
                partition_stats: bool = True) -> dict[str, dict[str, dict[str, ColumnRange]]]:
    """Every file of the latest file slices has ``column_stats`` equal to what its contents give (footer of a
    base file, records of a log file); every partition's ``partition_stats`` equal the merge of its latest
    files' (``exact_partitions``: only those; the others, after a replace commit, must bound them). Returns
    partition -> file name -> column -> statistics."""
    table = Table.open(base)
    cfg = table.config
    assert COLUMN_STATS in cfg.metadata_partitions, cfg.metadata_partitions
    st, root = Storage.from_uri(base)
    reader = MetadataTableReader(st, root, data_timeline=table.timeline(), data_config=cfg)
    stored = reader.read_partition(COLUMN_STATS)
    schema = with_meta(table.schema())
    cols = indexed_columns(schema)
    files: dict[str, dict[str, dict[str, ColumnRange]]] = {}
    for fs in table.view().latest_file_slices():
        for rel in fs.relative_paths:
            name = posixpath.basename(rel)
            want = {r.column: r for r in file_ranges(st, posixpath.join(root, rel), schema, cols)}
            got = {}
            for c in cols:
                rec = stored.get(column_stats_key(c, fs.partition, name))
                if rec is not None:
                    got[c] = ColumnRange.from_fields(rec.fields["ColumnStatsMetadata"])
            assert got == want, (rel, {c: (got.get(c), want.get(c)) for c in cols if got.get(c) != want.get(c)})
            files.setdefault(fs.partition, {})[name] = want
    if partition_stats and cfg.partition_fields:
        assert PARTITION_STATS in cfg.metadata_partitions, cfg.metadata_partitions
        ps = reader.read_partition(PARTITION_STATS)
        for part, fm in files.items():
            for rec in partition_records(part, fm, cols):
                got = ps.get(rec.key)
                assert got is not None, (part, rec.fields["ColumnStatsMetadata"]["columnName"])
                g, w = got.fields["ColumnStatsMetadata"], rec.fields["ColumnStatsMetadata"]
                if exact_partitions is None or part in exact_partitions:
                    assert g == w, (part, g, w)
                else:
                    assert_bounds(ColumnRange.from_fields(g), ColumnRange.from_fields(w), part)
    return files


def assert_bounds(outer: ColumnRange, inner: ColumnRange, where: str) -> None:
    """``outer`` statistics admit every value ``inner`` describes."""
    if inner.min is None:
        return
    assert outer.min is not None and outer.max is not None, (where, outer, inner)
    o = inner.ordinal
    assert stats_sort_key(outer.min, o) <= stats_sort_key(inner.min, o), (where, outer, inner)
    assert stats_sort_key(outer.max, o) >= stats_sort_key(inner.max, o), (where, outer, inner)
