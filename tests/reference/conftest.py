"""Fixtures of tests/reference/."""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from kafka_kip_reference import ReferenceCluster
from tests.reference.acl_helpers import running_acl_cluster


@pytest.fixture(scope='module')
def acl_cluster() -> Iterator[ReferenceCluster]:
    """The ACL tests' cluster (:func:`tests.reference.acl_helpers.running_acl_cluster`), one per module."""
    with running_acl_cluster() as cluster:
        yield cluster
