"""A Structured Streaming query for the exactly-once tests:
``python -m tests.support.stream_job SOURCE_DIR TABLE CHECKPOINT_DIR OPERATION``.

Reads the parquet files of SOURCE_DIR one per micro-batch and writes each batch into TABLE with
:func:`pyhudi.spark.streaming.foreach_batch`, until every file available at start is processed."""

from __future__ import annotations

import sys


def main(source: str, table: str, checkpoint: str, operation: str) -> int:
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import from_arrow_schema

    from pyhudi.spark.session import get_spark
    from pyhudi.spark.streaming import foreach_batch

    spark = get_spark()
    first = sorted(p for p in __import__("os").listdir(source) if p.endswith(".parquet"))[0]
    schema = from_arrow_schema(pq.read_schema(f"{source}/{first}"))
    opts = {
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.table.ordering.fields": "ts",
    }
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(source)
    query = (stream.writeStream.foreachBatch(foreach_batch(table, opts, operation))
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
