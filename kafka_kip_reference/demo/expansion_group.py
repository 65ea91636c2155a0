"""A keyed producer and a consumer group of another process, driven step by step
(:class:`kafka_kip_reference.fixtures.fresh.FreshProcess`) by the demo's expansion scene (:mod:`kafka_kip_reference.demo.expansion`).

``start(kip=False, ...)`` runs unmodified kafka-python in a process that never imports kafka_kip; ``kip=True``
kafka_kip's clients, started the same way. The producer sends keyed records (values 0, 1, 2, ... in send order;
the key of value v is ``key-{v % keys}``) from its own thread while the test grows the topic, up to a limit the
test raises (:func:`allow`) and with at most ``WINDOW`` records unacknowledged, so a run sends an exact number of
records at the pace the cluster acknowledges them; each group member
polls in its own thread and appends what each poll returned to one list under one lock, right after the poll
returned: that list is the global order of poll returns. Several groups may read at once (:func:`start_group`), each
with its own list.
"""
import logging
import threading

logging.basicConfig(level=logging.WARNING, format='%(threadName)s %(name)s %(levelname)s %(message)s')

WINDOW = 200  # records sent and not yet acknowledged, at most

state = {'producer': None, 'sent': [], 'returned': {}, 'members': [], 'marks': [], 'limit': 0}
lock = threading.Lock()
stopping = threading.Event()
allowed = threading.Condition()


def _member(module, group, name, bootstrap_servers, configs):
    consumer = module.KafkaConsumer('t', bootstrap_servers=bootstrap_servers, group_id=group, client_id=name, **configs)
    try:
        while not stopping.is_set():
            polled = consumer.poll(timeout_ms=500)
            with lock:
                state['returned'][group].extend([r.key.decode(), int(r.value), tp.partition, r.offset, name]
                                         for tp, records in polled.items() for r in records)
    finally:
        consumer.close()


def _produce(keys, total):
    producer, sent = state['producer'], state['sent']
    for value in range(total):
        with allowed:
            allowed.wait_for(lambda value=value: value < state['limit'])
        if value >= WINDOW:
            sent[value - WINDOW].get(timeout=120)
        sent.append(producer.send('t', key=b'key-%d' % (value % keys), value=b'%d' % value))


def start(kip, bootstrap_servers, producer_configs):
    """An idle producer of kafka_kip (``kip``) or of unmodified kafka-python."""
    state['module'] = _client_module(kip)
    state['producer'] = state['module'].KafkaProducer(bootstrap_servers=bootstrap_servers, **producer_configs)


def _client_module(kip):
    if kip:
        import kafka_kip as module
    else:
        import kafka as module
    return module


def start_group(bootstrap_servers, members, consumer_configs, group='g'):
    """Group ``group``: ``members`` consumers named <group>-m0, <group>-m1, ..., each polling in its own thread."""
    state['returned'][group] = []
    for n in range(members):
        name = f'{group}-m{n}'
        thread = threading.Thread(target=_member, args=(state['module'], group, name, bootstrap_servers,
                                                        consumer_configs), name=name, daemon=True)
        thread.start()
        state['members'].append(thread)


def start_producing(keys, total, limit):
    """The producer starts sending ``total`` records in its own thread; the first ``limit`` at once."""
    allow(limit)
    thread = threading.Thread(target=_produce, args=(keys, total), name='producer', daemon=True)
    thread.start()
    state['producer_thread'] = thread


def allow(limit):
    """The producer may send records up to value ``limit`` (excluded)."""
    with allowed:
        state['limit'] = limit
        allowed.notify()


def sent():
    """How many records were sent so far."""
    return len(state['sent'])


def mark():
    """Remember how many records were sent by now (the test calls it right after an expansion returned)."""
    state['marks'].append(len(state['sent']))
    return state['marks'][-1]


def partition_count():
    """How many partitions of 't' the producer's metadata knows (it refreshes every metadata_max_age_ms)."""
    return len(state['producer']._metadata.partitions_for_topic('t') or ())


def stop_producing():
    """Wait for the producer to send all its records and flush; how many records were sent."""
    state['producer_thread'].join()
    state['producer'].flush()
    return len(state['sent'])


def returned_count():
    """How many distinct records the group that returned the fewest returned so far."""
    with lock:
        return min(len({value for _, value, *_ in returned}) for returned in state['returned'].values())


def result():
    """Stop the groups; every record sent as [key, partition] by value, and by group every record returned as
    [key, value, partition, offset, member] in the global order of poll returns."""
    stopping.set()
    for thread in state['members']:
        thread.join()
    state['producer'].close()
    sent_records = [[f.get(0).topic_partition.partition if f.succeeded() else None] for f in state['sent']]
    return {'sent': sent_records, 'returned': state['returned'], 'marks': state['marks']}
