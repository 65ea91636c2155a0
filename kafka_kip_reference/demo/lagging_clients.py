"""A producer or consumer of another process, driven step by step (:class:`kafka_kip_reference.fixtures.fresh.FreshProcess`)
by the demo's lagging-broker scene (:mod:`kafka_kip_reference.demo.consistency`) and by tests/metadata/test_kip1243_scenarios.py.

``start_*(kip=False, ...)`` builds unmodified kafka-python, in a process that never imports kafka_kip; with
``kip=True`` the client comes from a kafka_kip ``ClientFactory`` over the store ``store`` names: ``{'context': hex}``,
a store starting at the consistency context handed over as bytes, or ``{'file': path}``, the file store the writer
uses too. The client asks for the scenario's topic from the start, and every metadata view it applies after the first
that asked for it is recorded: the number of partitions it shows of the topic (0: not in it), so a view taken from a
stale broker shows.
"""
import logging
import time

from kafka_kip_reference.fixtures.conditions import wait_until

logging.basicConfig(level=logging.WARNING, format='%(name)s %(levelname)s %(message)s')

state = {'client': None, 'topic': None, 'views': []}


def _factory(store):
    from kafka_kip import ClientFactory, ConsistencyContext, ConsistencyContextStore
    if 'file' in store:
        return ClientFactory(ConsistencyContextStore.file(store['file']))
    return ClientFactory(ConsistencyContextStore.of(ConsistencyContext.from_bytes(bytes.fromhex(store['context']))))


def _cluster():
    client = state['client']
    return client._metadata if hasattr(client, '_metadata') else client._cluster


def _manager():
    client = state['client']
    return client._sender._client._manager if hasattr(client, '_sender') else client._manager


def _record_views():
    def record(cluster):
        state['views'].append(len(cluster.partitions_for_topic(state['topic']) or ()))
    cluster = _cluster()
    cluster.add_topic(state['topic'])
    update = cluster.request_update()
    wait_until(lambda: update.is_done, 'a metadata update that asked for the topic')
    cluster.add_listener(record)


def start_consumer(kip, store, topic, configs):
    """A consumer with ``configs``; ``topic`` is the topic whose views are recorded."""
    _start('consumer', 'KafkaConsumer', kip, store, topic, configs)


def start_producer(kip, store, topic, configs):
    """A producer with ``configs``; ``topic`` is the topic whose views are recorded."""
    _start('producer', 'KafkaProducer', kip, store, topic, configs)


def _start(factory_method, stock_class, kip, store, topic, configs):
    state['topic'] = topic
    if kip:
        state['client'] = getattr(_factory(store), factory_method)(**configs)
    else:
        import kafka
        state['client'] = getattr(kafka, stock_class)(**configs)
    _record_views()


def refresh_from(broker_id):
    """One MetadataRequest for the scenario's topic to ``broker_id``, on the client's network thread, applied (or
    refused) by its cluster, as a refresh from that broker would be; the topic's partition count in the client's
    metadata after it. (kafka_kip asks another broker when one answers STALE_METADATA: the answer applied is then
    that broker's.)"""
    from kafka.protocol.metadata import MetadataRequest
    manager = _manager()
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=state['topic'])],
                              allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                              include_topic_authorized_operations=False)

    async def ask():
        cluster = manager.cluster
        cluster.update_metadata(await manager.send(request, node_id=broker_id))
        return len(cluster.partitions_for_topic(state['topic']) or ())

    future = manager.call_soon(ask)
    wait_until(lambda: future.is_done, f'the metadata response of broker {broker_id}')
    if future.failed():
        raise future.exception
    return future.value


def partitions_for_topic():
    """The consumer's public answer: the partitions of the scenario's topic, sorted."""
    return sorted(state['client'].partitions_for_topic(state['topic']))


def views():
    """The partition count of the scenario's topic in each metadata view applied so far (0: not in it)."""
    return list(state['views'])


def wait_for_view(partitions, seconds=20.0):
    """Until the client applied a view with ``partitions`` partitions of the scenario's topic."""
    wait_until(lambda: partitions in state['views'], f'a view with {partitions} partitions; views {state["views"]}',
               seconds)


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
