"""benchmarks/bench_consume.py: a run too small to time anything is refused, naming the value and what is accepted."""
from __future__ import annotations

import kafka
import pytest

from benchmarks import bench_consume
from benchmarks.harness import BenchmarkError


def test_min_records_leaves_every_mode_a_record_after_its_first_poll():
    assert bench_consume.MIN_RECORDS == 50_001  # 'poll, 50k records/poll': up to 50,000 in the first poll
    assert [bench_consume.untimed_records(mode) for mode in bench_consume.MODES] == [500, 50_000, 1]


@pytest.mark.parametrize('records', [0, 1, 10, 50_000])
def test_too_few_records_are_refused_before_anything_runs(capsys, records):
    with pytest.raises(SystemExit) as exited:
        bench_consume.main(['--records', str(records)])
    assert exited.value.code == 2
    assert f'--records {records}: too few to time; at least 50001' in capsys.readouterr().err


@pytest.mark.reference_cluster(brokers=1)
def test_a_phase_whose_first_poll_returns_everything_fails_naming_the_count(reference_cluster):
    reference_cluster.create_topic(bench_consume.TOPIC)
    producer = kafka.KafkaProducer(bootstrap_servers=reference_cluster.bootstrap_servers)
    for _ in range(10):
        producer.send(bench_consume.TOPIC, b'x', partition=0)
    producer.close()
    with pytest.raises(BenchmarkError, match='the first poll returned all 10 records, none was left to time; '
                                             '--records must be at least 50001'):
        bench_consume.consume_phase('kafka-python', 'poll, defaults', reference_cluster.bootstrap_servers, 10)
