"""prefetch: items computed ahead by the process's read threads, in order; errors surface at their item; a
consumer that stops early stops the producer; no thread is started per call."""

from __future__ import annotations

import threading
import time

import pytest

from pyhudi.read.slice_reader import prefetch


@pytest.mark.parametrize("call", [True, False])
def test_items_come_in_order(call: bool) -> None:
    items = [(lambda i=i: (time.sleep(0.001 * (i % 3)), i)[1]) for i in range(50)] if call else iter(range(50))
    assert list(prefetch(iter(items), call=call)) == list(range(50))


@pytest.mark.parametrize("call", [True, False])
def test_an_error_surfaces_at_its_item(call: bool) -> None:
    def fail() -> int:
        raise ValueError("item 3")

    def values():  # type: ignore[no-untyped-def]
        yield from range(3)
        raise ValueError("item 3")

    items = iter([lambda: 0, lambda: 1, lambda: 2, fail, lambda: 4]) if call else values()
    got = []
    with pytest.raises(ValueError, match="item 3"):
        for v in prefetch(items, call=call):
            got.append(v)
    assert got == [0, 1, 2]


def test_a_consumer_that_stops_early_stops_the_producer() -> None:
    produced = []

    def values():  # type: ignore[no-untyped-def]
        for i in range(1000):
            produced.append(i)
            yield i

    it = prefetch(values(), depth=1, call=False)
    assert next(it) == 0
    it.close()  # waits for the producer to stop
    n = len(produced)
    time.sleep(0.3)
    assert len(produced) == n < 10


def test_calls_share_the_process_threads() -> None:
    list(prefetch(iter([lambda: 1] * 8)))
    list(prefetch(iter(range(8)), call=False))
    before = threading.active_count()
    for _ in range(200):
        assert list(prefetch(iter([lambda: 1] * 4))) == [1] * 4
        assert list(prefetch(iter(range(4)), depth=1, call=False)) == list(range(4))
    assert threading.active_count() == before
