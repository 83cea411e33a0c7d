"""Exactly-once writes from Spark Structured Streaming.

``df.writeStream.foreachBatch(foreach_batch(path, options, "upsert")).option("checkpointLocation", ...).start()``
writes every micro-batch as one commit that records the batch id (Hudi's ``_hudi_streaming_sink_checkpoint``,
for ``hoodie.datasource.write.streaming.checkpoint.identifier``). A query restarted after a crash replays the
batches its checkpoint had not committed; a replayed batch that pyhudi did commit is skipped, so every batch lands
exactly once. A failed batch write is retried (``hoodie.datasource.write.streaming.retry.count`` times,
``...retry.interval.ms`` apart); then the query fails, or the batch is skipped with a warning when
``hoodie.datasource.write.streaming.ignore.failed.batch`` is true. Bad input or options, a table pyhudi cannot
write, a damaged file and a batch older than the stream's last (:class:`~pyhudi.errors.StreamingCheckpointError`)
are not retried.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pyhudi import config as C
from pyhudi.errors import ConfigError, CorruptFileError, InvalidInputError, UnsupportedTableError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from pyhudi.write.producer import WriteResult


class StreamingBatchWarning(UserWarning):
    """A micro-batch was skipped after its retries failed (``...streaming.ignore.failed.batch``)."""


def foreach_batch(
    path: str, options: Mapping[str, str], operation: str = "upsert"
) -> Callable[[DataFrame, int], WriteResult | None]:
    """A function for ``DataStreamWriter.foreachBatch`` writing each micro-batch into the table at ``path``
    (created from the first batch's schema if absent) with ``operation``."""
    opts = {k: str(v) for k, v in options.items()}
    C.WriteConfig.from_options({**opts, C.OPERATION: operation})  # bad options fail before the query starts
    retries = C.int_option(opts, C.STREAMING_RETRY_COUNT)
    pause_s = C.int_option(opts, C.STREAMING_RETRY_INTERVAL_MS) / 1000
    ignore_failed = C.bool_option(opts, C.STREAMING_IGNORE_FAILED_BATCH)

    def write_batch(df: DataFrame, batch_id: int) -> WriteResult | None:
        from pyhudi.table.table import Table

        last: Exception | None = None
        for attempt in range(retries + 1):
            try:
                return Table.for_dataframe(path, df, opts).write(df, operation, opts, batch_id=batch_id)
            # a retry would fail the same way (and a damaged file, skipped, would fail every later batch too)
            except (ConfigError, InvalidInputError, UnsupportedTableError, CorruptFileError):
                raise
            except Exception as e:  # retried: a later attempt of the same batch rolls this one back
                last = e
                if attempt < retries:
                    time.sleep(pause_s)
        assert last is not None
        if ignore_failed:
            warnings.warn(f"{path}: micro-batch {batch_id} skipped after {retries + 1} attempts: {last}",
                          StreamingBatchWarning, stacklevel=2)
            return None
        raise last

    return write_batch
