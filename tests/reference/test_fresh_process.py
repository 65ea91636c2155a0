"""kafka_kip_reference.fixtures.fresh: scenario steps in a fresh interpreter, stock kafka-python by default."""
from __future__ import annotations

import pytest

from kafka_kip_reference.fixtures.fresh import FreshProcess, FreshProcessError

SCENARIO = '''
import sys

import kafka

calls = []


def add(a, b):
    calls.append((a, b))
    return {'sum': a + b, 'calls': len(calls), 'kafka': kafka.__version__}


def fail():
    print('about to fail')
    raise ValueError('no such thing')


def import_kafka_kip():
    import kafka_kip  # noqa: F401
    return 'kafka_kip' in sys.modules
'''


@pytest.fixture
def scenario(tmp_path):
    path = tmp_path / 'scenario.py'
    path.write_text(SCENARIO)
    return path


def test_calls_run_in_one_fresh_process_that_keeps_its_state(scenario):
    import kafka
    with FreshProcess(scenario) as fresh:
        assert fresh.call('add', 2, 3) == {'sum': 5, 'calls': 1, 'kafka': kafka.__version__}
        assert fresh.call('add', 4, 5)['calls'] == 2
        with pytest.raises(FreshProcessError, match=r"(?s)scenario.py: fail\(\) failed: ValueError: no such thing\n"
                                                    r".*--- its stderr ---\nabout to fail"):
            fresh.call('fail')
        assert fresh.call('add', 1, 1)['calls'] == 3


def test_a_stock_process_that_imported_kafka_kip_fails_on_close(scenario):
    fresh = FreshProcess(scenario)
    assert fresh.call('import_kafka_kip') is True
    with pytest.raises(FreshProcessError, match='scenario.py imported kafka_kip in a process meant to run stock'):
        fresh.close()
    kip = FreshProcess(scenario, stock=False)
    assert kip.call('import_kafka_kip') is True
    kip.close()
