"""A producer or consumer of another process, driven step by step from a test (:mod:`kafka_kip.testing.fresh`).

``start_*(kip=False, ...)`` builds unmodified kafka-python, in a process that never imports kafka_kip; with
``kip=True`` the client comes from a kafka_kip ``ClientFactory`` over a store that starts at the consistency
context the test hands over as bytes (hex). Every metadata view the client applies while it asks for the
scenario's topic is recorded: the number of partitions it shows of it (0: not in it), so a view taken from a stale
broker shows.
"""
import logging
import time

logging.basicConfig(level=logging.WARNING, format='%(name)s %(levelname)s %(message)s')

state = {'client': None, 'topic': None, 'views': []}


def _factory(context_hex):
    from kafka_kip import ClientFactory, ConsistencyContext, ConsistencyContextStore
    context = ConsistencyContext.from_bytes(bytes.fromhex(context_hex))
    return ClientFactory(ConsistencyContextStore.of(context))


def _cluster():
    client = state['client']
    return client._metadata if hasattr(client, '_metadata') else client._cluster


def _manager():
    client = state['client']
    return client._sender._client._manager if hasattr(client, '_sender') else client._manager


def _record_views():
    def record(cluster):
        if state['topic'] in cluster._topics or cluster.need_all_topic_metadata:
            state['views'].append(len(cluster.partitions_for_topic(state['topic']) or ()))
    _cluster().add_listener(record)


def start_consumer(kip, context_hex, topic, configs):
    """A consumer with ``configs``; ``topic`` is the topic whose views are recorded."""
    state['topic'] = topic
    if kip:
        state['client'] = _factory(context_hex).consumer(**configs)
    else:
        from kafka import KafkaConsumer
        state['client'] = KafkaConsumer(**configs)
    _record_views()


def start_producer(kip, context_hex, topic, configs):
    """A producer with ``configs``; ``topic`` is the topic whose views are recorded."""
    state['topic'] = topic
    if kip:
        state['client'] = _factory(context_hex).producer(**configs)
    else:
        from kafka import KafkaProducer
        state['client'] = KafkaProducer(**configs)
    _record_views()


def _wait(condition, what, seconds=20.0):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f'not within {seconds} s: {what}')
        time.sleep(0.005)


def refresh_from(broker_id):
    """One metadata request for the client's topics to ``broker_id``, on the client's network thread, applied
    (or refused) by its cluster; the scenario's topic is one of them. (kafka_kip sends a request a broker answered
    STALE_METADATA to another broker: the answer applied is then that broker's.)"""
    manager = _manager()
    manager.cluster.add_topic(state['topic'])
    _wait(lambda: not manager.cluster.metadata_refresh_in_progress, 'no metadata refresh in progress')
    future = manager.call_soon(manager.cluster.refresh_metadata, broker_id)
    _wait(lambda: future.is_done, f'the metadata response of broker {broker_id}')
    if future.failed():
        raise future.exception


def partitions_for_topic():
    """The consumer's public answer: the partitions of the scenario's topic, sorted."""
    return sorted(state['client'].partitions_for_topic(state['topic']))


def views():
    """The partition count of the scenario's topic in each metadata view applied so far (0: not in it)."""
    return list(state['views'])


def stale_answers():
    """How many answers a broker gave from metadata older than the client's context (kafka_kip; None: stock)."""
    session = getattr(_manager(), 'consistency', None)
    return None if session is None else session.stale_responses


def send(values, keys=None, seconds=30.0):
    """Send ``values`` (str; keyed by ``keys`` if given) to the scenario's topic and wait for every
    acknowledgement: ``{'partitions': [...], 'offsets': [...], 'seconds': s}``, or ``{'error': ...}``."""
    producer = state['client']
    started = time.monotonic()
    try:
        futures = [producer.send(state['topic'], value=value.encode(),
                                 key=None if keys is None else keys[i].encode()) for i, value in enumerate(values)]
        sent = [future.get(timeout=seconds) for future in futures]
    except Exception as exc:  # reported as the outcome: what the client did
        return {'error': f'{type(exc).__name__}: {exc}', 'seconds': time.monotonic() - started}
    return {'partitions': [m.partition for m in sent], 'offsets': [m.offset for m in sent],
            'seconds': time.monotonic() - started}


def poll_all(count, seconds=20.0):
    """Assign every partition of the scenario's topic the consumer knows, poll from the beginning until ``count``
    records arrived: ``[[partition, offset, value], ...]``."""
    from kafka.structs import TopicPartition
    consumer = state['client']
    partitions = [TopicPartition(state['topic'], p) for p in sorted(consumer.partitions_for_topic(state['topic']))]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    records = []
    deadline = time.monotonic() + seconds
    while len(records) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f'not within {seconds} s: {count} records; got {records}')
        for batch in consumer.poll(timeout_ms=100).values():
            records.extend([r.partition, r.offset, r.value.decode()] for r in batch)
    return sorted(records)


def close():
    client = state['client']
    if hasattr(client, 'flush'):
        client.close(timeout=5)
    else:
        client.close()
