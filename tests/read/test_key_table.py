"""The compiled key table of the file-slice merge: dictionary encoding of repeated keys in order of first
appearance, and probes, exact for any bytes (empty, short, long, non-ASCII keys; keys sharing prefixes)."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pyhudi.read.merge import KeyTable


def test_encode_and_probe_match_arrow() -> None:
    rng = random.Random(3)
    alphabet = "ab\u00e9\u6f22\U0001f600-0"
    distinct = list(dict.fromkeys(["", "a", "ab", "abc" * 30] + [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(5000)
    ] + [f"k{i:08d}" for i in range(5000)]))
    seq = [rng.choice(distinct) for _ in range(30000)] + distinct
    keys = pa.array(seq, pa.string())
    kt = KeyTable(keys)
    enc = pc.dictionary_encode(keys)
    assert kt.count == len(enc.dictionary) == len(distinct)
    # ids in order of first appearance, as Arrow's dictionary encoding numbers them
    assert np.array_equal(kt.ids, enc.indices.to_numpy())
    queries = pa.array([*distinct, "zzz", "k000000001", "\u00e9\u00e9\u00e9", "abc" * 29 + "ab"], pa.string())
    got = kt.probe(queries)
    want = pc.index_in(queries, value_set=enc.dictionary).fill_null(-1).to_numpy()
    assert np.array_equal(got, want)


def test_empty_and_single() -> None:
    assert KeyTable(pa.array([], pa.string())).count == 0
    kt = KeyTable(pa.array(["x", "x", "x"]))
    assert kt.count == 1 and kt.ids.tolist() == [0, 0, 0]
    assert kt.probe(pa.array(["x", "y", ""])).tolist() == [0, -1, -1]
