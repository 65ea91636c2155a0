"""spark-mirror's ledger without Spark: batches' progress folded into the mirror's summary, failures read as
incidents, the exit status as ``kafka-kip mirror``'s."""
from __future__ import annotations

import json

from kafka.structs import TopicPartition

from kafka_kip.mirror.metrics import FlowStatus, MirrorMetrics
from kafka_kip.mirror.state import Incident, IncidentKind
from kafka_kip.spark.mirror_progress import CopyLedger, failure_incident

TP0, TP1 = TopicPartition('orders', 0), TopicPartition('orders', 1)
CLOSEST = ("orders-0: the source truncated its log at offset 0 (...) continuing from the truncation point in "
           'translated mode')


def progress(batch: int, *ranges: tuple, incidents: tuple[str, ...] = ()) -> str:
    """A progress update as Spark writes it (``StreamingQueryProgress.json``), with the mirror's observed metrics."""
    fields = ('topic', 'partition', 'startOffset', 'endOffset', 'records', 'bytes', 'mode', 'targetEnd', 'sourceEnd')
    partitions = [dict(zip(fields, r, strict=True)) for r in ranges]
    return json.dumps({'id': 'q', 'batchId': batch, 'observedMetrics': {'kafka_kip_mirror': {
        'copied_records': sum(p['records'] for p in partitions), 'copied_bytes': sum(p['bytes'] for p in partitions),
        'incidents': list(incidents), 'partitions': partitions}}})


def test_batches_fold_once_each_into_the_mirror_s_summary() -> None:
    seen: list[Incident] = []
    ledger = CopyLedger('auto', 'dr.', seen.append)
    ledger.fold(progress(0, ('orders', 0, 0, 10, 10, 700, 'broker', 10, 12), ('orders', 1, 0, 4, 4, 280, 'broker', 4, 4)))
    ledger.fold(progress(1, ('orders', 0, 10, 12, 2, 140, 'translated', 18, 15), incidents=(f'truncation: {CLOSEST}',)))
    ledger.fold(progress(1, ('orders', 0, 10, 12, 2, 140, 'translated', 18, 15)))  # the listener and recentProgress
    ledger.fold(json.dumps({'id': 'q', 'batchId': 2, 'observedMetrics': {}}))  # a batch without the observation
    ledger.ended()
    summary = ledger.summary()
    assert [(p.source, p.target, p.state, p.mode, p.copied_to, p.target_end, p.records, p.bytes, p.lag)
            for p in summary.partitions] == [
        (TP0, TopicPartition('dr.orders', 0), 'done', 'translated', 12, 18, 12, 840, 3),
        (TP1, TopicPartition('dr.orders', 1), 'done', 'broker', 4, 4, 4, 280, 0)]
    assert seen == summary.incidents == [
        Incident(IncidentKind.TRUNCATION, TP0, TopicPartition('dr.orders', 0), False, CLOSEST)]
    assert summary.incidents_by_kind() == {'truncation': 1}
    assert (summary.offset_mode, summary.records, summary.exit_code) == ('mixed', 16, 0)


def test_the_mirror_s_metrics_names_serve_the_query() -> None:
    ledger = CopyLedger('auto')
    ledger.fold(progress(0, ('orders', 0, 0, 10, 10, 700, 'broker', 10, 12)))
    families = {m.name: m for m in MirrorMetrics(lambda: [FlowStatus('source->target', ledger.summary(), True)])
                .collect()}
    labels = {'flow': 'source->target', 'topic': 'orders', 'partition': '0', 'target_topic': 'orders'}
    assert [(s.name, s.labels, s.value) for s in families['kafka_kip_mirror_copied_records'].samples] == [
        ('kafka_kip_mirror_copied_records_total', labels, 10)]
    assert [(s.labels, s.value) for s in families['kafka_kip_mirror_lag_records'].samples] == [(labels, 2)]


TRUNCATED = ('kafka_kip.errors.TruncatedPartitionError: [Error 10006] TruncatedPartitionError: source log truncated '
             '(unclean leader election?): orders-0: offsets 0..5 lost (log truncated at 0, position was 6). Set '
             'failOnDataLoss=false (or onTruncation=closest) to continue from the truncation point.')
RECREATED = ('kafka_kip.errors.InvalidPartitionEpochError: [Error 10001] InvalidPartitionEpochError: events-0 at offset '
             '4 with epochs (partition epoch 1, leader epoch 0, topic id 5f0c5a3e-0000-4000-8000-000000000001) belongs '
             'to another incarnation of the partition')


def test_a_failure_that_is_an_incident_stops_its_partition_with_exit_status_2() -> None:
    text = ('[STREAM_FAILED] Query terminated with exception: ...\nTraceback (most recent call last):\n'
            f'  File "planner.py", line 300, in check\n{TRUNCATED}\n')
    incident = failure_incident(text, 'dr.')
    assert incident == Incident(IncidentKind.TRUNCATION, TP0, TopicPartition('dr.orders', 0), True,
                                TRUNCATED.split(': ', 1)[1])
    ledger = CopyLedger('auto', 'dr.')
    ledger.fold(progress(0, ('orders', 0, 0, 6, 6, 420, 'broker', 6, 6), ('orders', 1, 0, 4, 4, 280, 'broker', 4, 4)))
    ledger.stopped(incident)
    summary = ledger.summary()
    assert [(p.source, p.state) for p in summary.partitions] == [(TP0, 'stopped'), (TP1, 'copying')]
    assert summary.exit_code == 2


def test_failures_read_as_their_incident_kind_or_as_none() -> None:
    recreated = failure_incident(RECREATED)
    assert (recreated.kind, recreated.source, recreated.stopped) == ('recreated', TopicPartition('events', 0), True)
    stopped = failure_incident('kafka_kip.spark.mirror.CopyStoppedError: offset-gap: my.topic-12: the target cannot '
                               'hold offset 5')
    assert (stopped.kind, stopped.source, stopped.message) == (
        'offset-gap', TopicPartition('my.topic', 12), 'my.topic-12: the target cannot hold offset 5')
    retention = failure_incident('kafka.errors.OffsetOutOfRangeError: [Error 1] OffsetOutOfRangeError: source records '
                                 'are no longer in the log (retention or DeleteRecords): t-0: offsets 1..4 lost')
    assert (retention.kind, retention.source) == ('retention', TopicPartition('t', 0))
    assert failure_incident('kafka.errors.KafkaTimeoutError: KafkaTimeoutError: no answer within 30000 ms') is None
    assert failure_incident('Python worker failed to connect back.') is None
