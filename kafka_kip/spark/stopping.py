"""``foreachBatch`` functions that let ``StreamingQuery.stop()`` end a query in the middle of a batch.

Spark 4.x crashes the stream thread with ``java.lang.StackOverflowError`` when a query is stopped while
its Python ``foreachBatch`` function runs a Spark job (``frame.collect()``, ``frame.write...``):

1. ``stop()`` interrupts the job; the function gets a ``Py4JJavaError`` (``java.lang.InterruptedException``)
   whose text carries the whole Java stack trace, and py4j hands the function's traceback -- ~8,000
   characters -- back to the stream thread as a ``py4j.Py4JException``;
2. to tell a stop from a failure, the stream thread matches that text with ``StreamExecution.PROXY_ERROR``,
   ``py4j.protocol.Py4JJavaError: An error occurred while calling((.|\\r\\n|\\r|\\n)*)(java.lang.InterruptedException|...)``
   (SPARK-48717); java.util.regex matches the ``(.|\\r\\n|\\r|\\n)*`` loop with a few stack frames per
   character, so a few thousand characters overflow the thread's stack.

The query still ends, but as an uncaught error instead of "Stopped". :func:`stoppable` wraps the function
so an interrupted job is re-raised as a short :class:`BatchInterrupted` whose text the regex recognises.
"""
from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from py4j.protocol import Py4JJavaError

#: The Java exceptions Spark's stream thread counts as "interrupted by stop()".
INTERRUPTIONS = ('java.lang.InterruptedException', 'java.io.InterruptedIOException',
                 'java.nio.channels.ClosedByInterruptException')
_MAX_CAUSES = 32  # cause chains are short; a bound keeps a cyclic chain from looping
#: A cancelled job, as Spark words it: its error condition, or (without one) a job group's cancellation.
#: StreamingQuery.stop() cancels by job group, or by the query's job tag ("Job 25 cancelled Query ... was stopped").
_CANCELLED = re.compile(r'^\[SPARK_JOB_CANCELLED\]|cancelled part of cancelled job group')


class BatchInterrupted(Exception):
    """The Spark job of a ``foreachBatch`` function was interrupted or cancelled (the query is stopping)."""


def interruption(error: Py4JJavaError) -> str | None:
    """What interrupted the job behind ``error`` (a Java class name, or the cancellation message), else None."""
    throwable = error.java_exception
    for _ in range(_MAX_CAUSES):
        if throwable is None:
            return None
        name = throwable.getClass().getName()
        if name in INTERRUPTIONS:
            return name
        message = str(throwable.getMessage() or '')
        if name == 'org.apache.spark.SparkException' and _CANCELLED.search(message):
            return message.splitlines()[0]
        throwable = throwable.getCause()
    return None


def stoppable(func: Callable[[Any, int], None]) -> Callable[[Any, int], None]:
    """``func`` for ``writeStream.foreachBatch``, re-raising an interrupted Spark job as :class:`BatchInterrupted`.

    Other errors pass through unchanged (the query fails with them as before).
    """
    @functools.wraps(func)
    def call(frame: Any, batch_id: int) -> None:
        try:
            func(frame, batch_id)
        except Py4JJavaError as error:
            cause = interruption(error)
            if cause is None:
                raise
            call_site = str(error.errmsg).strip().splitlines()[0]
            name = cause if cause in INTERRUPTIONS else INTERRUPTIONS[0]
            detail = '' if cause in INTERRUPTIONS else f' ({cause})'
            # Spark's PROXY_ERROR needs this prefix and one of INTERRUPTIONS in the text.
            raise BatchInterrupted(f'py4j.protocol.Py4JJavaError: {call_site} {name}: micro-batch {batch_id} was '
                                   f'interrupted{detail}, e.g. by StreamingQuery.stop()') from None
    return call
