"""``KafkaProducer.__init__`` building kafka_kip's RecordAccumulator and Sender instead of kafka-python's.

kafka-python's producer builds both inline and starts the sender thread in the same method, so they
cannot be swapped afterwards. Scoped: only :class:`kafka_kip.KafkaProducer` runs the returned function.
"""
from __future__ import annotations

from collections.abc import Callable

import kafka.producer.kafka as _stock

from kafka_kip._patch.rebind import rebound


def install(*, accumulator: type, sender: type) -> Callable[..., None]:
    """kafka-python's ``KafkaProducer.__init__`` building the given classes; raises KafkaPythonChanged if
    it no longer builds them by those names."""
    return rebound(_stock.KafkaProducer.__init__, RecordAccumulator=accumulator, Sender=sender)
