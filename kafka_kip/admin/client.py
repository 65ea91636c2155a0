"""``KafkaAdminClient``: kafka-python's admin client, the base the proposals' admin features extend."""
from __future__ import annotations

import kafka


class KafkaAdminClient(kafka.KafkaAdminClient):
    """kafka-python's ``KafkaAdminClient``; accepts every argument it accepts, unchanged."""
