"""The Spark options and ``kafka-kip spark-mirror`` flags, each declared once (docs/SPARK.md's tables).

:data:`SOURCE_OPTIONS`: ``format("kafka-kip")`` reads; :data:`SINK_OPTIONS`: its writes;
:data:`MIRROR_OPTIONS`: ``kafka-kip spark-mirror``'s flags and the ``kafka-kip-mirror`` source's own options.
Options keep the names of Spark's built-in Kafka source; ``kafka.<setting>`` options are client settings
(:mod:`kafka_kip.settings.java_clients`) and are not listed here.
"""
from __future__ import annotations

from dataclasses import replace

from kafka_kip.mirror.config import MIRROR_SETTINGS
from kafka_kip.policies import AUTO, OFF, OFFSET_MODE_DOC, OFFSET_MODES, STOP, TRUNCATION_SPELLINGS
from kafka_kip.settings import Setting, SettingsTable
from kafka_kip.settings.table import BOOL, CHOICE, DURATION, FLOAT, INT, JSON, REGEX, STRING, SWITCH

#: startingOffsetsByTimestampStrategy: a partition without a record at or after the timestamp fails the
#: query (ERROR) or starts at its latest offset (LATEST).
NO_MATCH_ERROR, NO_MATCH_LATEST = 'error', 'latest'
_BOOTSTRAP = Setting('bootstrap_servers', STRING, '', option='kafka.bootstrap.servers', required=True)
_INCLUDE_HEADERS = 'includeHeaders'

SOURCE_OPTIONS = SettingsTable('spark-source', (
    _BOOTSTRAP,
    Setting('subscribe', STRING, 'topic list, comma-separated; exactly one of `subscribe`, `subscribePattern`, '
            '`assign`', option='subscribe'),
    Setting('subscribe_pattern', REGEX, 'regex on the whole topic name', option='subscribePattern'),
    Setting('assign', JSON, 'partitions, JSON `{"t":[0,1]}`', option='assign'),
    Setting('starting_timestamp', STRING, 'ms; every partition starts at its first record with a timestamp >= it '
            '(precedes the two below)', option='startingTimestamp'),
    Setting('starting_offsets_by_timestamp', JSON, 'JSON `{"t": {"0": 1700000000000}}`, every subscribed '
            'partition (precedes `startingOffsets`)', option='startingOffsetsByTimestamp'),
    Setting('starting_offsets', JSON, '`earliest`, `latest` or JSON (below)', shown_default='batch `earliest`, '
            'streaming `latest`', option='startingOffsets'),
    Setting('starting_offsets_by_timestamp_strategy', CHOICE, 'a partition without such a record: `error` fails '
            'the query, `latest` starts it at its latest offset', NO_MATCH_ERROR, choices=(NO_MATCH_ERROR, NO_MATCH_LATEST),
            option='startingOffsetsByTimestampStrategy'),
    Setting('ending_timestamp', STRING, 'batch only, as `startingTimestamp`; a partition without such a record '
            'ends at latest', option='endingTimestamp'),
    Setting('ending_offsets_by_timestamp', JSON, 'batch only, as `startingOffsetsByTimestamp`',
            option='endingOffsetsByTimestamp'),
    Setting('ending_offsets', JSON, 'batch only: `latest` or JSON', shown_default='`latest`', option='endingOffsets'),
    Setting('fail_on_data_loss', BOOL, '`false` continues past lost records with a warning naming them, see '
            '[Truncation](#truncation-and-recreated-topics)', True, option='failOnDataLoss'),
    Setting('on_truncation', CHOICE, 'the same as `failOnDataLoss` (`fail` / `closest`), kafka-kip\'s name; `stop` '
            'and `none` are accepted for `fail`, as `kafka-kip mirror --on-truncation` and the consumer\'s '
            '`auto_offset_reset` spell it ([`kafka_kip.policies`](../kafka_kip/policies.py))', STOP,
            shown_default='`fail`', choices=tuple(TRUNCATION_SPELLINGS), option='onTruncation'),
    Setting('min_partitions', INT, 'at least about this many tasks: large ranges are cut, as Spark does',
            minimum=1, option='minPartitions'),
    Setting('max_records_per_partition', INT, 'tasks of at most about N offsets (not with `preserveOffsets` '
            'writes, see below)', minimum=1, option='maxRecordsPerPartition'),
    Setting('max_offsets_per_trigger', INT, 'streaming: offsets per micro-batch, shared in proportion to each '
            "partition's lag", minimum=1, option='maxOffsetsPerTrigger'),
    Setting('min_offsets_per_trigger', INT, 'streaming: wait for this many new offsets before a batch ...',
            minimum=1, option='minOffsetsPerTrigger'),
    Setting('max_trigger_delay_ms', DURATION, '... but no longer than this after the previous batch (`500ms`, '
            '`30s`, `15m`, `1h`)', 15 * 60_000, shown_default='`15m`', option='maxTriggerDelay'),
    Setting('group_id_prefix', STRING, "executors' consumers use group `<prefix>-<uuid>-executor`",
            option='groupIdPrefix'),
    Setting('group_id', STRING, "executors' consumers use this group (e.g. for ACLs); positions stay in the "
            'checkpoint', option='kafka.group.id'),
    Setting('fetch_attempts', INT, 'attempts of a driver-side metadata or ListOffsets request', 3, minimum=1,
            option='fetchOffset.numRetries'),
    Setting('fetch_retry_interval_ms', INT, "pause between them (Spark's code default; its docs say 10)", 1000,
            minimum=0, option='fetchOffset.retryIntervalMs'),
    Setting('include_headers', BOOL, 'a `headers` column', False, option=_INCLUDE_HEADERS),
    Setting('poll_timeout_ms', INT, 'a task fails when no record arrives for this long', 120_000, minimum=1,
            option='kafkaConsumer.pollTimeoutMs'),
))
#: Streaming-only options: accepted in a batch query with a warning, as Spark.
STREAM_ONLY = ('maxOffsetsPerTrigger', 'minOffsetsPerTrigger', 'maxTriggerDelay')

SINK_OPTIONS = SettingsTable('spark-sink', (
    _BOOTSTRAP,
    Setting('topic', STRING, 'target topic for every row', option='topic'),
    Setting('preserve_offsets', BOOL, "write each row at its `offset` (KIP-391)", False, option='preserveOffsets'),
    Setting('include_headers', BOOL, 'accepted with a warning: a `headers` column is written whenever there is '
            'one (as in Spark)', shown_default='', option=_INCLUDE_HEADERS),
))
#: Options Spark itself may pass along to a sink (not ours: not in the table).
SPARK_SINK_OPTIONS = ('path', 'checkpointLocation', 'queryName')

MIRROR_OPTIONS = SettingsTable('spark-mirror', (
    Setting('source', STRING, 'source bootstrap servers', flag='--source', option='kafka.bootstrap.servers',
            metavar='BOOTSTRAP', required=True),
    Setting('target', STRING, 'target bootstrap servers', flag='--target', option='target.bootstrap.servers',
            metavar='BOOTSTRAP', required=True),
    Setting('topics', REGEX, 'source topics to replicate, a regex on the whole name (e.g. `orders|payments`)',
            flag='--topics', option='subscribePattern', metavar='REGEX', required=True),
    Setting('checkpoint', STRING, 'Spark checkpoint directory (local path, HDFS, S3, ...): where the query resumes',
            flag='--checkpoint', metavar='DIR', required=True),
    Setting('master', STRING, 'Spark master, e.g. `local[2]`', shown_default='from spark-submit / Spark config',
            flag='--master'),
    Setting('starting_offsets', STRING, '`earliest`, `latest` or Spark-style JSON; used by a new checkpoint only',
            'earliest', flag='--starting-offsets', option='startingOffsets', metavar='WHERE'),
    Setting('on_truncation', CHOICE, 'source truncated below the checkpoint: `stop`, i.e. fail the query (also '
            'spelt `fail` or `none`) or `closest`: continue from the truncation point', STOP,
            choices=tuple(TRUNCATION_SPELLINGS), flag='--on-truncation', option='onTruncation'),
    Setting('max_offsets_per_trigger', INT, 'at most N offsets per micro-batch (all partitions together)',
            minimum=1, flag='--max-offsets-per-trigger', option='maxOffsetsPerTrigger', metavar='N'),
    Setting('offset_mode', CHOICE, f'as `kafka-kip mirror`, {OFFSET_MODE_DOC}', AUTO, choices=(*OFFSET_MODES, OFF),
            flag='--offset-mode', option='offsetMode'),
    Setting('topic_prefix', STRING, 'prefix of target topic names', '', shown_default='none (same names)',
            flag='--topic-prefix', option='topicPrefix', metavar='PREFIX'),
    replace(MIRROR_SETTINGS['offset_map_topic'], key=None, scope='', flag='--offset-map-topic',
            option='offsetMapTopic', metavar='TOPIC'),
    replace(MIRROR_SETTINGS['groups'], key=None, scope=''),
    replace(MIRROR_SETTINGS['group_sync_interval_ms'], key=None, scope='', flag='--group-sync-interval-ms',
            metavar='MS'),
    Setting('trigger_interval', FLOAT, 'micro-batch interval, seconds', 1.0, flag='--trigger-interval',
            metavar='SECONDS'),
    Setting('available_now', SWITCH, 'copy what the source has when the query starts, then exit',
            flag='--available-now'),
    Setting('quiet', SWITCH, "don't print each micro-batch's copied ranges", flag='--quiet'),
    replace(MIRROR_SETTINGS['metrics_port'], key=None, scope=''),
    replace(MIRROR_SETTINGS['metrics_host'], key=None, scope='', flag='--metrics-host', metavar='HOST'),
    Setting('json', SWITCH, 'print the summary at the end as JSON on stdout (as `kafka-kip mirror --json`); '
            'incidents go to stderr as one JSON object per line', flag='--json'),
))
