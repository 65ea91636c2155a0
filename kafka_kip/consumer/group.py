"""``KafkaConsumer``: kafka-python's consumer, the base every consumer-side proposal extends."""
from __future__ import annotations

import kafka


class KafkaConsumer(kafka.KafkaConsumer):
    """kafka-python's ``KafkaConsumer``; accepts every argument it accepts, unchanged.

    The consumer side of KIP-320 and KIP-232 is added to this class (see the README's API tour).
    """
