"""A consumer driven step by step from a test, in a fresh process (:mod:`kafka_kip_reference.fixtures.fresh`).

``start(kip=False, ...)`` makes it unmodified kafka-python, in a process that never imports kafka_kip;
``kip=True`` kafka_kip's consumer, started the same way. It records the brokers its Fetch requests go to and
every record it gets as ``[offset, leader_epoch, value]``. Arguments and results are JSON: partitions are
``[topic, partition]`` lists or ``"topic-partition"`` keys.
"""
import logging
import time

from kafka.protocol.api_key import ApiKey

from kafka_kip_reference.fixtures.conditions import wait_until

logging.basicConfig(level=logging.INFO, format='%(name)s %(levelname)s %(message)s')

state = {'consumer': None, 'fetches': [], 'records': []}


def start(kip, configs):
    """A consumer built with ``configs``; topics to subscribe to go in ``configs['topics']``."""
    if kip:
        from kafka_kip import KafkaConsumer
    else:
        from kafka import KafkaConsumer
    configs = dict(configs)
    consumer = KafkaConsumer(*configs.pop('topics', ()), **configs)
    manager, send = consumer._manager, consumer._manager.send

    def recording_send(request, node_id=None, **kwargs):
        future = send(request, node_id=node_id, **kwargs)
        if request.API_KEY == ApiKey.Fetch:
            state['fetches'].append((node_id, future))
        return future

    manager.send = recording_send
    state['consumer'] = consumer


def _tp(topic, partition):
    from kafka.structs import TopicPartition
    return TopicPartition(topic, partition)


def assign(partitions):
    state['consumer'].assign([_tp(*p) for p in partitions])


def subscribe(topics):
    state['consumer'].subscribe(topics)


def seek(topic, partition, offset):
    state['consumer'].seek(_tp(topic, partition), offset)


def set_position(topic, partition, offset, leader_epoch):
    """The position a stock consumer has after consuming up to ``offset`` in ``leader_epoch`` (its public
    seek() takes no epoch)."""
    from kafka.structs import OffsetAndMetadata
    state['consumer']._subscription.seek(_tp(topic, partition), OffsetAndMetadata(offset, '', leader_epoch))



def load_metadata():
    """Metadata for the consumer's topics, from whichever broker kafka-python asks."""
    update = state['consumer']._cluster.request_update()
    wait_until(lambda: update.is_done, 'a metadata update', 10.0)


def refresh_from(broker_id):
    """One metadata request to ``broker_id``, on the consumer's network thread, applied (or refused) by it."""
    manager = state['consumer']._manager
    # Not merged into a refresh of the consumer's own that is under way (it could go to any broker).
    wait_until(lambda: not manager.cluster.metadata_refresh_in_progress, 'no metadata refresh in progress', 10.0)
    future = manager.call_soon(manager.cluster.refresh_metadata, broker_id)
    wait_until(lambda: future.is_done, f'the metadata response of broker {broker_id}', 10.0)
    if future.failed():
        raise future.exception


def wait_for_metadata_settled():
    """Until no metadata refresh is wanted or under way (one that refused outdated metadata asks again)."""
    cluster = state['consumer']._cluster
    wait_until(lambda: not cluster.need_update and not cluster.metadata_refresh_in_progress,
               'metadata refreshes to end', 10.0)


def metadata(topic, partition):
    """The partition in the consumer's metadata: leader, leader epoch, and what only kafka_kip's cluster knows
    (partition epoch, outdated responses refused; None on kafka-python's)."""
    cluster, tp = state['consumer']._cluster, _tp(topic, partition)
    partition_epoch = getattr(cluster, 'partition_epoch_for_partition', None)
    return {'leader': cluster.leader_for_partition(tp), 'leader_epoch': cluster.leader_epoch_for_partition(tp),
            'partition_epoch': None if partition_epoch is None else partition_epoch(tp),
            'outdated_responses': getattr(cluster, 'outdated_responses', None)}


def seen():
    positions = {f'{tp.topic}-{tp.partition}': s.position.offset
                 for tp, s in state['consumer']._subscription.assignment.items() if s.position is not None}
    return {'positions': positions, 'records': state['records'],
            'fetched_from': [node_id for node_id, _ in state['fetches']]}


def _poll_once():
    for batch in state['consumer'].poll(timeout_ms=100).values():
        state['records'].extend([r.offset, r.leader_epoch, r.value.decode()] for r in batch)


def _poll_until(condition, what, seconds):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f'not within {seconds} s: {what}; seen {seen()}')
        _poll_once()
    return seen()


def poll_until_records(count, seconds=20.0):
    """Poll until ``count`` records arrived in all."""
    return _poll_until(lambda: len(state['records']) >= count, f'{count} records', seconds)


def poll_until_offset(offset, seconds=20.0):
    """Poll until the last record received is at ``offset``."""
    return _poll_until(lambda: state['records'][-1:] and state['records'][-1][0] == offset,
                       f'a record at offset {offset} last', seconds)


def poll_until_offset_or_rewind(offset, since, rewound_to, seconds=20.0):
    """Poll until the last record is at ``offset``, or a record at ``rewound_to`` came after the first ``since``."""
    def done():
        return (state['records'][-1:] and state['records'][-1][0] == offset) or \
            any(r[0] == rewound_to for r in state['records'][since:])
    return _poll_until(done, f'offset {offset} last, or {rewound_to} again after record {since}', seconds)


def poll_until_positioned(partition, seconds=20.0):
    """Poll until ``partition`` ("topic-partition") has a position (assigned, committed offset fetched)."""
    return _poll_until(lambda: partition in seen()['positions'], f'a position for {partition}', seconds)


def poll_until_fetches_answered(after, seconds=20.0):
    """Poll until more than ``after`` Fetch requests were sent and the first ``after + 1`` were answered."""
    def done():
        fetches = state['fetches']
        return len(fetches) > after and all(future.is_done for _, future in fetches[:after + 1])
    return _poll_until(done, f'{after + 1} Fetch requests answered', seconds)


def poll_times(count):
    """``count`` polls of 100 ms each; what the consumer has seen after them."""
    for _ in range(count):
        _poll_once()
    return seen()


def poll_error(seconds=20.0):
    """Poll until a poll raises: ``{'error': module.class, 'args': [...]}`` (a dict argument keyed by partition
    comes back keyed by "topic-partition"). A record arriving first is an assertion error."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            _poll_once()
        except Exception as exc:
            args = [{f'{tp.topic}-{tp.partition}': v for tp, v in a.items()} if isinstance(a, dict) else a
                    for a in exc.args]
            return {'error': f'{type(exc).__module__}.{type(exc).__name__}', 'args': args}
        if state['records']:
            raise AssertionError(f'records instead of an error: {seen()}')
    raise AssertionError(f'no error within {seconds} s; seen {seen()}')


def close():
    state['consumer'].close()
