"""``KafkaProducer``: kafka-python's producer, the base every producer-side proposal extends."""
from __future__ import annotations

import kafka


class KafkaProducer(kafka.KafkaProducer):
    """kafka-python's ``KafkaProducer``; accepts every argument it accepts, unchanged.

    Producing with offsets (KIP-391) and partition counts (KIP-253) are added to this class.
    """
