"""Shared fixtures. ``codec_mode``: run a test with kafka_kip's compiled record codec and with the fallback.

``fallback`` sets :data:`kafka_kip._codec.compiled` to None for the test, as on an install without a C
compiler: clients built during the test use kafka-python's record code. ``compiled`` needs the extension
built (``make test`` builds it); without it the test is skipped, or fails under CI, where it must be built.
"""
from __future__ import annotations

import os

import pytest

from kafka_kip import _codec

MODES = ('compiled', 'fallback')


def require_compiled() -> None:
    if _codec.compiled is None:
        message = 'the compiled record codec is not built (python setup.py build_ext --inplace)'
        if os.environ.get('CI'):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(params=MODES)
def codec_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == 'compiled':
        require_compiled()
    else:
        monkeypatch.setattr(_codec, 'compiled', None)
    return request.param
