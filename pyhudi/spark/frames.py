"""DataFrames of rows the driver holds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


def local_frame(spark: SparkSession, rows: Sequence[Sequence[Any]], schema: str | StructType) -> DataFrame:
    """A DataFrame of a few rows the driver holds (``schema`` a DDL string or a StructType), made from an Arrow
    table: the JVM keeps it as a local relation. ``spark.createDataFrame`` of Python rows instead makes an RDD
    whose rows a Python worker converts, of another kind than the workers of pyhudi's Arrow tasks (an RDD's
    environment): a fresh process starts a second Python daemon for it, 1.6-2 s on 2 cores."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    struct = schema if isinstance(schema, StructType) else StructType.fromDDL(schema)
    assert isinstance(struct, StructType), schema
    # timestamps (a table's schema, for an empty read) carry the session's time zone, as Spark's Arrow batches do
    arrow = to_arrow_schema(struct, timezone=spark.conf.get("spark.sql.session.timeZone") or "UTC")
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in arrow]
    table = pa.table([pa.array(list(c), f.type) for c, f in zip(columns, arrow, strict=True)], schema=arrow)
    return arrow_frame(spark, table, struct)


def arrow_frame(spark: SparkSession, table: pa.Table, schema: StructType | None = None) -> DataFrame:
    """``spark.createDataFrame`` of an Arrow table, handed over as one record batch. PySpark 4.3 ends the stream
    of a table's batches at an empty one that follows rows: a table of 2, 0 and 3 rows becomes a DataFrame of 2
    rows, with no error. Joins, filters and concatenations of Arrow tables (and readers' outputs) make empty
    batches."""
    one = table.combine_chunks()
    return spark.createDataFrame(one) if schema is None else spark.createDataFrame(one, schema=schema)


def held_rows(df: DataFrame) -> int:
    """Rows that ``df``'s plan holds itself: the size of its local relations (what ``spark.createDataFrame`` makes of
    pandas, Arrow or Python rows), unless they are cached already; 0 when it has none or they cannot be told."""
    try:
        spark = df.sparkSession
        if spark._jsparkSession.sharedState().cacheManager().lookupCachedData(df._jdf).isDefined():
            return 0
        leaves = df._jdf.queryExecution().analyzed().collectLeaves()
        return sum(int(leaves.apply(i).data().size()) for i in range(leaves.size())
                   if leaves.apply(i).getClass().getSimpleName() == "LocalRelation")
    except Exception:  # a session without the JVM classic API (Spark Connect): nothing to tell
        return 0
