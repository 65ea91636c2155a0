"""``kafka_kip.arrow.write.write_table`` against a ``send()`` loop of the same rows, on Apache Kafka.

One Apache Kafka broker (:mod:`kafka_kip_reference.external.apache_kafka`); N rows (key ``k<n>``, value 100 bytes) as a
pyarrow Table, and the same rows as Python bytes for the loop (built before timing). Each round writes them
to a fresh topic of P partitions once with ``write_table(table, ..., topic=...)`` and once with
``producer.send(topic, value=..., key=...)`` per row then ``flush()`` (a ``kafka_kip.KafkaProducer`` made
before timing), interleaved for ``--rounds`` rounds after an untimed warm-up of each; both with kafka_kip's
producer defaults (acks, idempotence), each with its own default batch_size (write_table 256 KiB,
``WRITE_BATCH_SIZE``; send() kafka-python's 16 KiB). Every topic is checked to hold N records (untimed).

    python -m benchmarks.bench_write_table [--records 1000000] [--partitions 4] [--rounds 3]

Prints a table (medians; the ratio is the median of the rounds' ratios); progress on stderr.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence

import pyarrow as pa

from benchmarks.brokers import end_offsets
from benchmarks.harness import BenchmarkError
from kafka_kip import KafkaProducer
from kafka_kip.arrow.write import write_table
from kafka_kip_reference.external.apache_kafka import ApacheKafkaCluster

WAYS = ('write_table', 'send() loop')


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog='python -m benchmarks.bench_write_table', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--records', type=int, default=1_000_000, help='rows to write (default 1,000,000)')
    parser.add_argument('--partitions', type=int, default=4, help='topic partitions (default 4)')
    parser.add_argument('--rounds', type=int, default=3, help='interleaved rounds (default 3)')
    args = parser.parse_args(argv)
    keys = [b'k%d' % n for n in range(args.records)]
    values = [b'%0100d' % n for n in range(args.records)]
    table = pa.table({'key': pa.array(keys, pa.binary()), 'value': pa.array(values, pa.binary())})
    rates: dict[str, list[float]] = {way: [] for way in WAYS}
    with ApacheKafkaCluster(brokers=1) as kafka:
        bootstrap = kafka.bootstrap_servers
        topics = iter(range(1_000_000))

        def timed(way: str) -> float:
            topic = f'table-{next(topics)}'
            kafka.create_topic(topic, args.partitions)
            if way == 'write_table':
                start = time.perf_counter()
                write_table(table, bootstrap, topic=topic)
                seconds = time.perf_counter() - start
            else:
                producer = KafkaProducer(bootstrap_servers=bootstrap)
                producer.partitions_for(topic)
                start = time.perf_counter()
                send = producer.send
                for key, value in zip(keys, values, strict=True):
                    send(topic, value=value, key=key)
                producer.flush()
                seconds = time.perf_counter() - start
                producer.close()
            written = sum(end_offsets(bootstrap, topic, args.partitions))
            if written != args.records:
                raise BenchmarkError(f'{way}: topic {topic} holds {written:,} records, expected {args.records:,}')
            return seconds

        for way in WAYS:
            timed(way)  # warm-up
        for round_ in range(args.rounds):
            for way in (WAYS if round_ % 2 == 0 else WAYS[::-1]):
                rate = args.records / timed(way)
                rates[way].append(rate)
                print(f'round {round_ + 1}: {way}: {rate:,.0f} records/s', file=sys.stderr, flush=True)
    ratio = statistics.median(t / s for t, s in zip(rates['write_table'], rates['send() loop'], strict=True))
    print(f'{args.records:,} rows (key ~7 bytes, value 100 bytes), {args.partitions} partitions, one Apache Kafka '
          f'broker; medians of {args.rounds} interleaved rounds\n\n| way | records/s |\n|---|---|\n'
          + '\n'.join(f'| {way} | {statistics.median(rates[way]):,.0f} |' for way in WAYS)
          + f'\n\nwrite_table / send() loop: {ratio:.2f}x')
    return 0


if __name__ == '__main__':
    sys.exit(main())
