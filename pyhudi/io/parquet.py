"""Opening parquet files as Hudi's readers read them.

INT96 timestamps (the legacy encoding of Spark, Hive and Impala, which Hudi's row writer writes with
``hoodie.parquet.outputtimestamptype=INT96``) are read as microseconds, the unit of Hudi's ``timestamp-micros``:
pyarrow reads them as nanoseconds by default, and a time outside 1677-2262 then wraps silently (1500-01-01 reads
as 2084-07-20).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    import pyarrow.dataset as pads

INT96_UNIT = "us"


def parquet_file(source: Any) -> pq.ParquetFile:
    """``pq.ParquetFile`` of ``source`` (a path or file), INT96 timestamps read as microseconds."""
    return pq.ParquetFile(source, coerce_int96_timestamp_unit=INT96_UNIT)


def read_parquet(source: Any) -> pa.Table:
    """A whole parquet file (``source``: a path or file) as an Arrow table, INT96 timestamps as microseconds."""
    return pq.read_table(source, coerce_int96_timestamp_unit=INT96_UNIT)


def parquet_format() -> pads.ParquetFileFormat:
    """The dataset format of parquet files, INT96 timestamps read as microseconds."""
    import pyarrow.dataset as pads

    return pads.ParquetFileFormat(read_options=pads.ParquetReadOptions(coerce_int96_timestamp_unit=INT96_UNIT))
