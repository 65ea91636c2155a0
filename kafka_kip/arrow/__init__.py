"""The public columnar face of kafka_kip (extra ``arrow``): Kafka records in and out as ``pyarrow.Table`` s.

>>> from kafka_kip.arrow import read_table
>>> table = read_table('localhost:9092', 'orders', start={0: 1200}, isolation_level='read_committed')
>>> frame = table.to_pandas()

:func:`write_table` (:mod:`kafka_kip.arrow.write`) writes a table with the Spark Kafka sink's columns through
kafka_kip's producer, encoded by the compiled encoder (optionally at the offsets of its ``offset`` column, KIP-391).
:func:`read_table` (:mod:`kafka_kip.arrow.read`) reads offset ranges into Spark's Kafka source columns, decoded
by the compiled codec straight into Arrow (:mod:`kafka_kip.arrow.columns`; the Spark source's read tasks share
the loop, :mod:`kafka_kip.arrow.partition_reader`), with the consumer's KIP-320/232 checks. See docs/ARROW.md.
"""
from __future__ import annotations

from kafka_kip.arrow.read import read_table
from kafka_kip.arrow.write import WriteCounts, write_table

__all__ = ['WriteCounts', 'read_table', 'write_table']
