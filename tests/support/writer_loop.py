"""A writer process for the concurrency tests: ``python -m tests.support.writer_loop BASE NAME PLAN.json LOG``.

PLAN is a JSON object: ``options`` (write options), ``batches`` (a list of ``{"op": ..., "rows": [...]}``), and
optionally ``master``. For each batch the process appends ``BEGIN <i>`` to LOG before writing, then ``DONE <i>
<instant>`` (or ``FAIL <i> <error class>: <message>``) once the write returned, flushed and fsynced, so the test
knows exactly which writes reported success even if this process is killed.
"""

from __future__ import annotations

import json
import os
import sys

import pyarrow as pa


def _log(f, line: str) -> None:  # type: ignore[no-untyped-def]
    f.write(line + "\n")
    f.flush()
    os.fsync(f.fileno())


def main(base: str, name: str, plan_path: str, log_path: str) -> int:
    from pyhudi.spark.session import get_spark
    from pyhudi.table.table import Table

    with open(plan_path) as f:
        plan = json.load(f)
    spark = get_spark(plan.get("master"))
    schema = pa.schema([("id", pa.string()), ("p", pa.string()), ("ts", pa.int64()), ("v", pa.float64())])
    opts = {k: str(v) for k, v in plan["options"].items()}
    with open(log_path, "a") as log:
        for i, batch in enumerate(plan["batches"]):
            _log(log, f"BEGIN {i}")
            df = spark.createDataFrame(pa.Table.from_pylist(batch["rows"], schema=schema))
            try:
                table = Table.for_dataframe(base, df, opts)
                res = table.write(df, batch["op"], opts)
            except Exception as e:  # reported, and the loop goes on (as a pipeline retrying later would)
                msg = str(e).replace("\n", " ")[:500]
                _log(log, f"FAIL {i} {type(e).__name__}: {msg}")
                continue
            _log(log, f"DONE {i} {res.instant}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
