"""A kafka_kip group member in a process of its own, driven from a test (:mod:`kafka_kip_reference.fixtures.fresh`), so that
the test can kill it: the member that crashes while it holds partitions created by an expansion (KIP-253)."""
import logging

from kafka import ConsumerRebalanceListener
from kafka.coordinator.assignors.range import RangePartitionAssignor

from kafka_kip import KafkaConsumer

logging.basicConfig(level=logging.INFO, format='%(name)s %(levelname)s %(message)s')

state = {'consumer': None, 'returned': [], 'pause_below': 0}


class _PauseAtAssignment(ConsumerRebalanceListener):
    """Pauses the partitions below ``state['pause_below']`` as they are assigned (a rebalance inside poll()
    assigns them unpaused, and that poll() may fetch them at once)."""

    def on_partitions_revoked(self, revoked):
        pass

    def on_partitions_assigned(self, assigned):
        state['consumer'].pause(*[tp for tp in assigned if tp.partition < state['pause_below']])


def start(bootstrap_servers, configs):
    """A member of ``configs['group_id']`` subscribed to topic 't' (range assignor)."""
    state['consumer'] = KafkaConsumer(bootstrap_servers=bootstrap_servers,
                                      partition_assignment_strategy=[RangePartitionAssignor], **configs)
    state['consumer'].subscribe(['t'], listener=_PauseAtAssignment())


def _poll(pause_below=0):
    consumer = state['consumer']
    state['pause_below'] = pause_below
    consumer.pause(*[tp for tp in consumer.assignment() if tp.partition < pause_below])
    for tp, records in consumer.poll(timeout_ms=50).items():
        state['returned'].extend([tp.partition, r.offset] for r in records)


def assigned():
    """One poll; the partitions assigned."""
    _poll()
    return sorted(tp.partition for tp in state['consumer'].assignment())


def poll_held(prior=2):
    """One poll with the partitions below ``prior`` paused; the partitions held at an expansion."""
    _poll(pause_below=prior)
    return sorted(tp.partition for tp, s in state['consumer']._subscription.assignment.items()
                  if s.expansion_hold is not None)


def returned():
    """[partition, offset] of every record its polls returned."""
    return state['returned']
