"""Errors raised inside Spark tasks come back to the driver wrapped in Py4J/PySpark exceptions; this unwraps
them into the pyhudi error the task raised, so the user sees the same clear message as in local code."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from pyhudi import errors

_TASK_ERROR = re.compile(r"pyhudi\.errors\.(\w+): (.+)")


@contextmanager
def task_errors() -> Iterator[None]:
    try:
        yield
    except errors.PyHudiError:
        raise
    except Exception as e:
        m = _TASK_ERROR.search(str(e))
        if m:
            cls = getattr(errors, m.group(1), None)
            if isinstance(cls, type) and issubclass(cls, errors.PyHudiError):
                err = cls.__new__(cls)
                Exception.__init__(err, m.group(2).strip())
                raise err from None
        raise
