"""A consumer group member driven step by step from a test, in a fresh process (kafka_kip.testing.fresh).

``start(kip=False)`` makes it unmodified kafka-python (the process never imports kafka_kip), ``kip=True``
kafka_kip's consumer. It records the brokers its Fetch requests go to and the records it gets.
"""
import logging
import time

logging.basicConfig(level=logging.INFO, format='%(name)s %(levelname)s %(message)s')

state = {'consumer': None, 'fetched_from': [], 'records': []}


def start(kip, bootstrap_servers, topic, group):
    if kip:
        from kafka_kip import KafkaConsumer
    else:
        from kafka import KafkaConsumer
    consumer = KafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=group, enable_auto_commit=False,
                             auto_offset_reset='none', fetch_max_wait_ms=100)
    manager, send = consumer._manager, consumer._manager.send

    def recording_send(request, node_id=None, **kwargs):
        if request.API_KEY == 1:
            state['fetched_from'].append(node_id)
        return send(request, node_id=node_id, **kwargs)

    manager.send = recording_send
    consumer.subscribe([topic])
    state['consumer'] = consumer


def _seen():
    consumer = state['consumer']
    positions = {f'{tp.topic}-{tp.partition}': s.position.offset
                 for tp, s in consumer._subscription.assignment.items() if s.position is not None}
    return {'positions': positions, 'records': state['records'], 'fetched_from': state['fetched_from']}


def poll_until(records=None, positioned=None, seconds=20):
    """Poll until ``records`` records arrived in all, or ``positioned`` (a partition name) has a position."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for batch in state['consumer'].poll(timeout_ms=100).values():
            state['records'].extend([r.offset, r.value.decode()] for r in batch)
        seen = _seen()
        if (records is not None and len(seen['records']) >= records) or positioned in seen['positions']:
            return seen
    raise AssertionError(f'not reached within {seconds} s: {_seen()}')


def poll_times(count):
    """``count`` polls of 100 ms each; what the member has seen after them."""
    for _ in range(count):
        for batch in state['consumer'].poll(timeout_ms=100).values():
            state['records'].extend([r.offset, r.value.decode()] for r in batch)
    return _seen()


def close():
    state['consumer'].close()
