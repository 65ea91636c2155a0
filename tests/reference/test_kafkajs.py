"""KafkaJS 2.2.4's admin against the reference cluster: ``examples/kafkajs_admin.js`` (alterConfigs,
describeConfigs, createAcls / describeAcls / deleteAcls over SCRAM-SHA-256 with an authorizer), each answer checked
by the script. Runs where Node.js finds ``kafkajs`` (``npm install kafkajs@2.2.4`` in the checkout, or its
``node_modules`` on ``NODE_PATH``); skipped elsewhere."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / 'examples' / 'kafkajs_admin.js'


def kafkajs_version() -> str | None:
    """The version of the ``kafkajs`` Node.js resolves from the example's directory, None if it finds none."""
    if shutil.which('node') is None:
        return None
    found = subprocess.run(['node', '-e', "console.log(require('kafkajs/package.json').version)"],
                           cwd=EXAMPLE.parent, capture_output=True, text=True, timeout=60)
    return found.stdout.strip() if found.returncode == 0 else None


@pytest.mark.reference_cluster(1, users={'admin': 'admin-pw', 'app': 'app-pw'}, authorizer=True,
                               super_users={'admin'})
def test_kafkajs_admin_example_passes(reference_cluster):
    version = kafkajs_version()
    if version is None:
        pytest.skip('Node.js or kafkajs is not installed (npm install kafkajs@2.2.4)')
    assert version == '2.2.4'
    run = subprocess.run(['node', str(EXAMPLE), reference_cluster.bootstrap_servers], cwd=EXAMPLE.parent,
                         capture_output=True, text=True, timeout=300)
    assert (run.returncode, run.stdout.strip().splitlines()[-1:]) == (0, [
        'KafkaJS admin: alterConfigs, describeConfigs, createAcls, describeAcls, deleteAcls as expected']), run.stderr
