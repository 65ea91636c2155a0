"""A running ``spark-mirror``: its ``StreamingQuery`` and what runs beside it on the driver.

Beside the query: a listener folding each batch's progress into a :class:`~kafka_kip.spark.mirror_progress.CopyLedger`
(what was copied, the incidents) and, with ``groups``, the group sync (:mod:`kafka_kip.spark.groups`).
:meth:`MirrorQuery.summary` is the mirror's :class:`~kafka_kip.mirror.mirror.MirrorSummary` of the run.
"""
from __future__ import annotations

from typing import Any

from kafka_kip.mirror.groups import LAST_ROUND_RETRY_S, GroupSyncResult
from kafka_kip.mirror.mirror import EXIT_NOT_ALL_COPIED, EXIT_OK, MirrorSummary
from kafka_kip.spark.groups import QueryGroupSync
from kafka_kip.spark.mirror_progress import CopyLedger, failure_incident

#: ``MirrorQuery.exit_code`` when the query failed for another reason than an incident (as ``kafka-kip mirror``'s
#: "could not run").
EXIT_FAILED = 1


def _progress_listener(query_id: str, ledger: CopyLedger) -> Any:
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class ProgressListener(StreamingQueryListener):
        """Folds the progress of one query into the ledger."""

        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            if str(event.progress.id) == query_id:
                ledger.fold(event.progress)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    return ProgressListener()


class MirrorQuery:
    """The replication query (every ``StreamingQuery`` method and attribute passes through), its ledger and group
    sync.

    :meth:`stop` stops the query, then syncs the groups once more; after a query ended by itself
    (``availableNow``) or failed, call :meth:`finish`. Then :meth:`summary` and :attr:`exit_code` say how it went.
    """

    def __init__(self, spark: Any, query: Any, ledger: CopyLedger, group_sync: QueryGroupSync | None = None) -> None:
        self.query = query
        self.ledger = ledger
        self.group_sync = group_sync
        self._streams = spark.streams
        self._listener = _progress_listener(str(query.id), ledger)
        self._streams.addListener(self._listener)
        self._finished = False
        self._stopped_by_user = False
        self.failure: str | None = None  # the query's error, when it failed for another reason than an incident

    def __getattr__(self, name: str) -> Any:
        return getattr(self.query, name)

    def stop(self) -> None:
        """Stop the query, then :meth:`finish`."""
        self._stopped_by_user = True
        self.query.stop()
        self.finish()

    def finish(self) -> None:
        """After the query ended: the last batches' progress folded; a failure that is an incident recorded as
        such (its partition stopped); the last group sync round -- none after a failure: a partition stopped by an
        incident is not synced, as in the mirror; connections closed. Does nothing the second time."""
        if self._finished:
            return
        self._finished = True
        try:
            self._streams.removeListener(self._listener)
            for progress in self.query.recentProgress:  # the listener bus may not have delivered the last ones
                self.ledger.fold(progress)
            error = self.query.exception()
            if error is not None:
                text = str(error)
                incident = failure_incident(text, self.ledger.topic_prefix)
                if incident is None:
                    self.failure = text
                else:
                    self.ledger.stopped(incident)
            elif self.ended_by_itself:
                self.ledger.ended()
        finally:
            if self.group_sync is not None:
                try:
                    self.group_sync.stop(last_round_retry_s=None if self.query.exception() else LAST_ROUND_RETRY_S)
                finally:
                    self.group_sync.close()

    @property
    def ended_by_itself(self) -> bool:
        """True when the query ended without a stop or failure (``availableNow``)."""
        return not self.query.isActive and self.query.exception() is None and not self._stopped_by_user

    @property
    def groups(self) -> GroupSyncResult:
        """The group sync's outcome so far (empty without ``groups``)."""
        return self.group_sync.result if self.group_sync is not None else GroupSyncResult()

    def summary(self) -> MirrorSummary:
        """The mirror's summary of the run so far (after :meth:`finish`: of the whole run)."""
        return self.ledger.summary(self.groups)

    @property
    def exit_code(self) -> int:
        """As ``kafka-kip mirror``'s: 0 all copied and synced, 2 a partition stopped by an incident or a group sync
        failed; 1 the query failed otherwise (:attr:`failure`)."""
        summary = self.summary()
        if any(incident.stopped for incident in summary.incidents):
            return EXIT_NOT_ALL_COPIED
        return EXIT_FAILED if self.failure is not None and summary.exit_code == EXIT_OK else summary.exit_code
