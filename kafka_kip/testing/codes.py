"""Moved: the error codes live in :mod:`kafka_kip.protocol.constants`; this name stays importable."""
from kafka_kip.protocol.constants import *  # noqa: F403
