"""The wire vocabulary: outside ``kafka_kip/protocol/`` an API key is spelt ``ApiKey.<Name>``, never a bare number.

An AST check over the tree: a number as the key of a request/response class lookup (``REQUESTS[3]``,
``RESPONSES.get(18)``), as the API key of a wire client's ``send``, of a header (``request_api_key=3``), in a
comparison with an API key, or as the value of a ``*_KEY`` constant.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from kafka.protocol.api_key import ApiKey

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ('kafka_kip', 'kafka_kip_reference', 'tests', 'integration', 'benchmarks')
EXEMPT = ROOT / 'kafka_kip' / 'protocol'  # the one home of the numbers (ApiKey, the extension API's key)
_LOOKUP_TABLES = frozenset({'REQUESTS', 'RESPONSES', 'EXTENDED_RESPONSES'})
_KEY_NAMES = frozenset({'api_key', 'request_api_key', 'API_KEY'})
#: constants named for an API (``PRODUCE``, ``JOIN_GROUP``, ``_METADATA_KEY``, ``API_VERSIONS_KEY``)
_API_CONSTANTS = frozenset(re.sub(r'(?<!^)(?=[A-Z])', '_', key.name).upper() for key in ApiKey)


def _names_an_api(name: str | None) -> bool:
    return bool(name) and (name.endswith('_KEY') or re.sub(r'^_|(_API)?_KEY$', '', name) in _API_CONSTANTS)


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_number(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def bare_api_keys(source: str) -> list[tuple[int, str]]:
    """(line, what) of every bare API key number in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and _name(node.value) in _LOOKUP_TABLES and _is_number(node.slice):
            found.append((node.lineno, f'{_name(node.value)}[{node.slice.value}]'))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr, args = node.func.attr, node.args
            if attr == 'get' and _name(node.func.value) in _LOOKUP_TABLES and args and _is_number(args[0]):
                found.append((node.lineno, f'{_name(node.func.value)}.get({args[0].value})'))
            elif attr == 'send' and len(args) >= 3 and _is_number(args[0]) and _is_number(args[1]):
                found.append((node.lineno, f'.send({args[0].value}, ...)'))
            elif attr == 'control' and args and _is_number(args[0]):
                found.append((node.lineno, f'.control({args[0].value}, ...)'))
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg in _KEY_NAMES and _is_number(keyword.value):
                    found.append((node.lineno, f'{keyword.arg}={keyword.value.value}'))
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_name(o) in _KEY_NAMES for o in operands) and any(_is_number(o) for o in operands):
                found.append((node.lineno, 'an API key compared with a number'))
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                unpacked = isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                pairs = zip(target.elts, node.value.elts, strict=True) if unpacked else [(target, node.value)]
                found.extend((node.lineno, f'{_name(name)} = {value.value}') for name, value in pairs
                             if _is_number(value) and _names_an_api(_name(name)))
    return found


def _sources() -> list[Path]:
    return sorted(path for folder in SCANNED for path in (ROOT / folder).rglob('*.py')
                  if EXEMPT not in path.parents and '.venv' not in path.parts)


def test_no_bare_api_key_numbers_outside_protocol() -> None:
    offences = [f'{path.relative_to(ROOT)}:{line}: {what}'
                for path in _sources() for line, what in bare_api_keys(path.read_text(encoding='utf-8'))]
    assert offences == [], 'spell API keys as kafka.protocol.api_key.ApiKey members:\n' + '\n'.join(offences)


@pytest.mark.parametrize(('source', 'expected'), [
    ('REQUESTS[3]', [(1, 'REQUESTS[3]')]),
    ('messages.RESPONSES.get(18)', [(1, 'RESPONSES.get(18)')]),
    ('wire.send(0, 9, body)', [(1, '.send(0, ...)')]),
    ('RequestHeader(request_api_key=3)', [(1, 'request_api_key=3')]),
    ('x = [h for h in hs if h.request_api_key == 18]', [(1, 'an API key compared with a number')]),
    ('API_VERSIONS_KEY = 18', [(1, 'API_VERSIONS_KEY = 18')]),
    ('JOIN_GROUP, HEARTBEAT, PORT = 11, 12, 9092', [(1, 'JOIN_GROUP = 11'), (1, 'HEARTBEAT = 12')]),
    ('PRODUCE = 0; _METADATA_KEY = 3; RECORDS = 150', [(1, 'PRODUCE = 0'), (1, '_METADATA_KEY = 3')]),
    ('cluster.control(10, record, keep=True)', [(1, '.control(10, ...)')]),
    ('REQUESTS[ApiKey.Metadata]; wire.send(ApiKey.Produce, 9, b""); queue.send(1)', []),
])
def test_the_check_finds_each_spelling(source: str, expected: list[tuple[int, str]]) -> None:
    assert bare_api_keys(source) == expected
