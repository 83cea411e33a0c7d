"""Reading tables: the file-group (file slice) reader, scan planning and the Spark read of file slices."""


def warm_up() -> None:
    """Run the reader's compiled kernels once on tiny inputs (a Spark worker's daemon calls it, so tasks do not
    load them; a benchmark before it measures)."""
    import json

    import pyarrow as pa

    from pyhudi.io.logfile import (
        DeleteRecord,
        avro_block_content,
        decode_avro_block_content,
        decode_delete_columns,
        encode_delete_content,
    )
    from pyhudi.read.merge import EVENT_TIME, KeyTable, LogRecords, MergeConfig

    schema = json.dumps({"type": "record", "name": "w", "fields": [
        {"name": "_hoodie_record_key", "type": ["null", "string"]}, {"name": "ts", "type": ["null", "long"]},
        {"name": "d", "type": ["null", "double"]}, {"name": "b", "type": ["null", "boolean"]},
        {"name": "i", "type": ["null", "int"]}]})
    t = pa.table({"_hoodie_record_key": ["a", "b"], "ts": [1, 2], "d": [1.0, None], "b": [True, False],
                  "i": [1, None]}, schema=pa.schema([("_hoodie_record_key", pa.string()), ("ts", pa.int64()),
                                                     ("d", pa.float64()), ("b", pa.bool_()), ("i", pa.int32())]))
    rows = decode_avro_block_content(avro_block_content(t, schema), schema)
    dels = decode_delete_columns(encode_delete_content([DeleteRecord("a", "", 0), DeleteRecord("b", "", 5)]))
    recs = LogRecords(rows.schema, MergeConfig(EVENT_TIME, ("ts",)), "<warm-up>")
    recs.add_data(rows, rows)
    recs.add_deletes(dels)
    w = recs.resolve()
    if w.key_table is not None:
        w.key_table.probe(pa.array(["a", "z"]))
    KeyTable(pa.array(["x"]))
