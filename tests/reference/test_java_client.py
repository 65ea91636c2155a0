"""Apache Kafka's own Java client (kafka-clients from Maven Central) against the reference cluster, and
against Apache Kafka as the baseline the same expectations come from.

tests/reference/java/JavaClientCheck.java is compiled with javac once per source version into the kafka-kip cache and
run once per scenario; each prints ``key=value`` lines compared here with exact expectations. Skips with one
line where Java, javac or Maven Central is missing.
"""
from __future__ import annotations

import hashlib
import subprocess
import threading
import uuid
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.protocol.api_key import ApiKey

from kafka_kip_reference.broker.control import ControlledRequest, Delay
from kafka_kip_reference.external import maven
from kafka_kip_reference.fixtures.conditions import wait_until
from tests.support.kip848_clusters import (
    FenceOnceAfterCommits,
    LoseRevocationAck,
)

KAFKA_CLIENTS = 'org.apache.kafka:kafka-clients:4.4.0'
#: The reference clusters of the KIP-848 scenarios below dictate 200 ms heartbeats: each reconciliation step waits
#: for a member's next heartbeat (tests/support's 500 ms, which other tests assert, cost about a second a scenario).
JAVA_848_HEARTBEATS = {'group.consumer.heartbeat.interval.ms': 200}
SOURCE = Path(__file__).parent / 'java' / 'JavaClientCheck.java'


@pytest.fixture(scope='module')
def java_client() -> list[str]:
    """The command line that runs JavaClientCheck (compiled on first use)."""
    try:
        java, javac = maven.require_tool('java'), maven.require_tool('javac')
        jars = maven.resolve('kafka-clients', [KAFKA_CLIENTS])
    except maven.JavaUnavailable as exc:
        pytest.skip(f'the Java client cannot run here: {exc}')
    source = SOURCE.read_bytes()
    classes = maven.cache_dir() / 'java' / hashlib.sha256(source + KAFKA_CLIENTS.encode()).hexdigest()[:12]
    with maven.file_lock(classes.with_suffix('.lock')):
        if not (classes / 'JavaClientCheck.class').exists():
            classes.mkdir(parents=True, exist_ok=True)
            subprocess.run([javac, '-d', str(classes), '-cp', f'{jars}/*', str(SOURCE)], check=True,
                           capture_output=True, text=True)
    return [java, '-Xmx256m', '-XX:TieredStopAtLevel=1', '-cp', f'{classes}:{jars}/*', 'JavaClientCheck']


@pytest.fixture(params=['reference', 'apache-kafka'])
def bootstrap(request: pytest.FixtureRequest) -> str:
    """The reference cluster (3 brokers), or the session's Apache Kafka cluster."""
    name = 'reference_cluster' if request.param == 'reference' else 'apache_kafka'
    return request.getfixturevalue(name).bootstrap_servers


def run(java_client: list[str], bootstrap: str, scenario: str, topic: str | None = None) -> dict[str, str]:
    topic = topic or f'java-{scenario}-{uuid.uuid4().hex[:8]}'
    result = subprocess.run([*java_client, bootstrap, scenario, topic], capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, f'JavaClientCheck {scenario} failed:\n{result.stdout}\n{result.stderr[-4000:]}'
    return dict(line.split('=', 1) for line in result.stdout.splitlines() if '=' in line)


def test_idempotent_produce_with_every_codec(java_client: list[str], bootstrap: str) -> None:
    """acks=all idempotent batches with none/gzip/snappy/lz4/zstd land at consecutive offsets and read back."""
    out = run(java_client, bootstrap, 'produce')
    codecs = ('none', 'gzip', 'snappy', 'lz4', 'zstd')
    assert {f'offsets.{c}': out[f'offsets.{c}'] for c in codecs} == \
        {f'offsets.{c}': ','.join(str(10 * i + o) for o in range(10)) for i, c in enumerate(codecs)}
    assert (out['consumed'], out['first'], out['last']) == ('50', '0:value-none-0', '49:value-zstd-9')


def test_three_member_group_commits_and_rebalances(java_client: list[str], bootstrap: str) -> None:
    """Three members own one partition each and commit; one leaves, the two others share all three and
    read exactly the 6 new records; the committed offsets are the log ends."""
    out = run(java_client, bootstrap, 'group')
    assert (out['first.assignment'], out['first.records']) == ('[1, 1, 1]', '30')
    assert (out['second.assignment'], out['second.records']) == ('[1, 2]', '6')
    assert out['committed'] == '{0=12, 1=12, 2=12}'


def test_list_offsets_by_timestamp(java_client: list[str], bootstrap: str) -> None:
    """offsetsForTimes finds the first record at or after the time, none after the last record."""
    out = run(java_client, bootstrap, 'timestamps')
    assert [out[f'at.{t}'] for t in (-1000, 5, 20, 21)] == ['0@0', '1@10', '2@20', 'none']
    assert (out['beginning'], out['end']) == ('0', '3')


def test_admin_creates_grows_and_deletes_a_topic(java_client: list[str], bootstrap: str) -> None:
    """createTopics (2 partitions), createPartitions (to 4), deleteTopics."""
    out = run(java_client, bootstrap, 'admin')
    assert (out['created.partitions'], out['grown.partitions'], out['listed.after.delete']) == ('2', '4', 'false')


#: What the transactions scenario reads: 3 records + marker, 2 aborted + marker, 1 + marker on partition 0; 2 + marker
#: and 1 + marker on partition 1.
TRANSACTIONS_READ = {'end.offsets': '9,5', 'read.committed': '{0=[0:a0, 1:a1, 2:a2, 7:c0], 1=[0:b0, 1:b1, 3:c1]}'}


def test_transactions_commit_abort_offsets_and_fencing(java_client: list[str], bootstrap: str) -> None:
    """A transactional producer commits (with its group's offsets), aborts, commits; read_committed reads what was
    committed; a second producer with the same transactional.id fences the first (its next produce is refused)."""
    out = run(java_client, bootstrap, 'transactions', topic='java-txn')
    assert {key: out[key] for key in TRANSACTIONS_READ} == TRANSACTIONS_READ
    # at transaction.version 2 the zombie's produce is refused (its epoch is older), not its AddPartitionsToTxn
    assert (out['group.offsets'], out['fenced']) == ('[java-txn-0=3]', 'InvalidProducerEpochException')


@pytest.mark.parametrize(('level', 'path'), [
    (2, {'produce': [13], 'end_txn': [5], 'txn_offset_commit': [6], 'add_partitions': [], 'add_offsets': []}),
    (1, {'produce': [11], 'end_txn': [4], 'txn_offset_commit': [4], 'add_partitions': [3], 'add_offsets': [4]}),
])
def test_transactions_take_the_path_of_the_finalized_transaction_version(
        java_client: list[str], reference_cluster_factory, level: int, path: dict[str, list[int]]) -> None:
    """transaction.version 2 (Kafka 4.4's default): Produce and TxnOffsetCommit add to the transaction, no
    AddPartitionsToTxn / AddOffsetsToTxn, EndTxn v5 bumps the epoch on every commit and abort (init 0, three
    transactions, the successor's InitProducerId: 4). Finalized at 1: the client takes the old path, the epoch moves
    only with InitProducerId (1). The same records either way."""
    cluster = reference_cluster_factory(3)
    if level != 2:
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
        try:
            assert admin.update_features({'transaction.version': ('SAFE_DOWNGRADE', level)}) == {
                'transaction.version': 'OK'}
        finally:
            admin.close()
    keys = {'produce': ApiKey.Produce, 'end_txn': ApiKey.EndTxn, 'txn_offset_commit': ApiKey.TxnOffsetCommit,
            'add_partitions': ApiKey.AddPartitionsToTxn, 'add_offsets': ApiKey.AddOffsetsToTxn}
    seen: set[tuple[int, int]] = set()
    cluster.control(None, lambda request: seen.add((request.api_key, request.api_version)), keep=True)
    out = run(java_client, cluster.bootstrap_servers, 'transactions', topic='java-txn')
    assert {key: out[key] for key in TRANSACTIONS_READ} == TRANSACTIONS_READ
    assert out['fenced'] == ('InvalidProducerEpochException' if level == 2 else 'ProducerFencedException')
    assert {name: sorted(v for k, v in seen if k == key) for name, key in keys.items()} == path
    transaction = cluster.transactions.transactions['java-txn-tx']
    assert transaction.producer_epoch == (4 if level == 2 else 1)


def test_update_features_on_transaction_version(java_client: list[str], bootstrap: str) -> None:
    """The Admin client's describeFeatures / updateFeatures: transaction.version supported 0-2 and finalized at 2;
    a validate-only downgrade changes nothing; a downgrade typed UPGRADE and a level above 2 are refused
    (INVALID_UPDATE_VERSION); SAFE_DOWNGRADE to 1 and UPGRADE back to 2 apply."""
    out = run(java_client, bootstrap, 'features')
    assert out == {
        'finalized': '2', 'supported': 'SupportedVersionRange[min_version:0, max_version:2]',
        'validate.downgrade': 'ok', 'after.validate': '2', 'downgrade.as.upgrade': 'InvalidUpdateVersionException',
        'too.high': 'InvalidUpdateVersionException', 'downgrade': 'ok', 'after.downgrade': '1', 'upgrade': 'ok',
        'after.upgrade': '2'}


def test_kip848_three_members_read_every_record_once_and_hand_over(java_client: list[str], bootstrap_848: str) -> None:
    """group.protocol=consumer: 3 members over 6 partitions hold 2 each, disjoint and complete, and read the 60
    records once; the group is listed as a consumer group; after one member closes the two others hold 3 each and
    read exactly the 12 new records; the committed offsets are the log ends."""
    out = run(java_client, bootstrap_848, 'group848')
    assert (out['first.assignment'], out['first.records'], out['first.partitions']) == (
        '[2, 2, 2]', '60', 'disjoint [0, 1, 2, 3, 4, 5]')
    assert out['listed'] == 'CONSUMER consumer'
    assert (out['second.assignment'], out['second.records'], out['second.partitions']) == (
        '[3, 3]', '12', 'disjoint [0, 1, 2, 3, 4, 5]')
    assert out['committed'] == '{0=12, 1=12, 2=12, 3=12, 4=12, 5=12}'


def test_kip848_fenced_member_rejoins_and_reads_on(java_client: list[str], reference_cluster_factory) -> None:
    """A heartbeat answered FENCED_MEMBER_EPOCH (control()) once the member committed its 30 records: it loses
    its partitions, rejoins with epoch 0, gets them back and reads the next 30 from the committed offsets."""
    cluster = reference_cluster_factory(3, broker_config=JAVA_848_HEARTBEATS)
    fence = FenceOnceAfterCommits(cluster, 30)
    cluster.control(ApiKey.ConsumerGroupHeartbeat, fence, keep=True)
    out = run(java_client, cluster.bootstrap_servers, 'fenced848')
    assert fence.fired == 1
    assert len(fence.joins) == 2  # the first join and the rejoin with epoch 0
    assert out['first.records'] == '30'
    assert out['events'] == '[assigned[0, 1, 2], lost[0, 1, 2], assigned[0, 1, 2]]'
    assert out['total.records'] == '60'


class FirstMemberSettlesFirst:
    """A ``control()`` function for ConsumerGroupHeartbeat: the joins of later members wait until the first member
    reported the partitions it was given. A join arriving while the first still reconciles finds it owning nothing,
    so the broker has nothing to wait for and no revocation is acknowledged (as Kafka does)."""

    def __init__(self) -> None:
        self.first: str | None = None
        self.settled = threading.Event()

    def __call__(self, request: ControlledRequest) -> Delay | None:
        heartbeat = request.request
        if self.first is None and heartbeat.member_epoch == 0:
            self.first = heartbeat.member_id
        if heartbeat.member_id == self.first and heartbeat.topic_partitions:
            self.settled.set()
        if heartbeat.member_epoch == 0 and heartbeat.member_id != self.first and not self.settled.is_set():
            return Delay(seconds=60, until=self.settled)
        return None


def test_kip848_heartbeat_lost_mid_reconciliation(java_client: list[str], reference_cluster_factory) -> None:
    """The heartbeat acknowledging a revocation is processed (the member moves to a new epoch) and its response
    lost (the connection closed, control()): the member heartbeats again with its previous epoch and what it
    owns, which Kafka's rule accepts; the group scenario reads every record once all the same."""
    cluster = reference_cluster_factory(3, broker_config=JAVA_848_HEARTBEATS)
    cluster.control(ApiKey.ConsumerGroupHeartbeat, FirstMemberSettlesFirst(), keep=True)
    lose = LoseRevocationAck(cluster)
    handle = cluster.control(ApiKey.ConsumerGroupHeartbeat, lose, keep=True)
    out = run(java_client, cluster.bootstrap_servers, 'group848')
    assert handle.fired == 1
    [(before, after)] = lose.epochs
    assert after > before
    # it came back with the epoch it had (accepted: its previous epoch, owning a subset), never rejoined
    assert lose.sent_after[0] == before and 0 not in lose.sent_after and -1 in lose.sent_after
    assert (out['first.assignment'], out['first.records'], out['first.partitions']) == (
        '[2, 2, 2]', '60', 'disjoint [0, 1, 2, 3, 4, 5]')
    assert (out['second.assignment'], out['second.records']) == ('[3, 3]', '12')
    assert out['committed'] == '{0=12, 1=12, 2=12, 3=12, 4=12, 5=12}'


def test_kip848_coordinator_moves(java_client: list[str], reference_cluster_factory) -> None:
    """The group's coordinator stops once the 3 members committed the first 60 records: the group moves to another
    broker with its members, epochs and offsets (as a Kafka coordinator loads it), the members find it, and the
    scenario goes on reading every record once. The member that closes right after the stop may send its leave
    to the stopped broker: then its session (3 s here, Kafka's default 45 s) expires instead (it does in nearly every run:
    the test waits for that expiry)."""
    cluster = reference_cluster_factory(3, broker_config={**JAVA_848_HEARTBEATS, 'group.consumer.session.timeout.ms': 3000})
    topic = f'java-moved-{uuid.uuid4().hex[:8]}'
    group_id = f'{topic}-g'
    outputs: list[dict[str, str]] = []
    java = threading.Thread(target=lambda: outputs.append(run(java_client, cluster.bootstrap_servers, 'group848', topic)))
    java.start()

    def committed_first_records() -> bool:
        group = cluster.groups.groups.get(group_id)
        offsets = group.offsets.all() if group is not None else {}
        return sum(o.offset for ps in offsets.values() for o in ps.values()) == 60

    wait_until(committed_first_records, 'the first 60 records committed', timeout=120)
    old_coordinator = cluster.state.coordinator_for(group_id)
    cluster.stop_broker(old_coordinator)
    java.join(timeout=240)
    [out] = outputs
    assert cluster.groups.groups[group_id].coordinator_id not in (None, old_coordinator)
    assert (out['first.assignment'], out['first.records'], out['first.partitions']) == (
        '[2, 2, 2]', '60', 'disjoint [0, 1, 2, 3, 4, 5]')
    assert (out['second.assignment'], out['second.records'], out['second.partitions']) == (
        '[3, 3]', '12', 'disjoint [0, 1, 2, 3, 4, 5]')
    assert out['committed'] == '{0=12, 1=12, 2=12, 3=12, 4=12, 5=12}'


def test_client_quotas_altered_and_described(java_client: list[str], bootstrap: str) -> None:
    """AlterClientQuotas (validate-only, valid, refused, removals) and DescribeClientQuotas filters (exact, default,
    any name; strict or not), through Admin.alterClientQuotas / describeClientQuotas."""
    quota_id = f'q{uuid.uuid4().hex[:8]}'
    out = run(java_client, bootstrap, 'quotas', quota_id)
    user, client = f'user:{quota_id}-user', f'client-id:{quota_id}-client'
    assert {key: value for key, value in out.items() if key.startswith(('validate.only', 'alter.', 'remove.'))} == {
        f'validate.only.{client}': 'OK',
        f'alter.{client}': 'OK', f'alter.{user}': 'OK', f'alter.client-id:<default>,{user}': 'OK',
        f'alter.{client},{user}': 'OK', 'alter.ip:10.1.2.3': 'OK',
        f'alter.{client}-bad': 'InvalidRequestException',  # an unknown key
        f'alter.{user}-frac': 'InvalidRequestException',  # a fractional byte rate
        f'alter.ip:10.9.9.9,{user}': 'InvalidRequestException',  # ip combined with user
        f'alter.{client}-neg': 'InvalidRequestException',  # not above 0
        'alter.ip:10.9.9.8': 'InvalidRequestException',  # a byte rate on an ip
        'alter.user:': 'InvalidRequestException',  # an empty name
        f'remove.{client}': 'OK', f'remove.{user}': 'OK', f'remove.client-id:<default>,{user}': 'OK',
        f'remove.{client},{user}': 'OK', 'remove.ip:10.1.2.3': 'OK'}
    default_client = f'client-id:<default>,{user}{{producer_byte_rate=4096.0}}'
    user_client = f'{client},{user}{{controller_mutation_rate=10.0}}'
    client_only = f'{client}{{consumer_byte_rate=2097152.0, producer_byte_rate=1048576.0}}'
    user_only = f'{user}{{request_percentage=50.5}}'
    assert {key: value for key, value in out.items() if not key.startswith(('validate.only', 'alter.', 'remove.'))} \
        == {'after.validate.only': '',
            'user': f'{default_client};{user_client};{user_only}', 'user.strict': user_only,
            'user.default.client': default_client,
            'user.any.client': f'{default_client};{user_client}',  # any name: the default one too
            'client': f'{user_client};{client_only}', 'client.strict': client_only,
            'ip': 'ip:10.1.2.3{connection_creation_rate=7.0}',
            'ip.and.user': 'InvalidRequestException', 'unknown.type': 'UnsupportedVersionException',
            'user.after.remove': ''}


def test_incremental_alter_configs_and_scram_credentials(java_client: list[str], bootstrap: str) -> None:
    """Admin.incrementalAlterConfigs on a topic's cleanup.policy / retention.ms: validate-only changes nothing; SET
    with APPEND, then SUBTRACT with DELETE apply (describeConfigs: value and source); an unknown key (validate-only or
    not), APPEND to a non-list key, a bad value are refused (InvalidConfigurationException), an unknown topic too.
    Admin.alterUserScramCredentials / describeUserScramCredentials: upserts, too few or too many iterations refused
    (UnacceptableCredentialException), a missing credential's deletion and description (ResourceNotFoundException),
    one user altered twice in a request (DuplicateResourceException), every user listed, deletions."""
    out = run(java_client, bootstrap, 'configs-scram')
    initial = 'cleanup.policy=delete:DEFAULT_CONFIG,retention.ms=604800000:DEFAULT_CONFIG'
    altered = 'cleanup.policy=compact:DYNAMIC_TOPIC_CONFIG,retention.ms=604800000:DEFAULT_CONFIG'
    refused = 'InvalidConfigurationException'
    assert out == {
        'configs.initial': initial, 'validate.only': 'OK', 'after.validate.only': initial,
        'set.append': 'OK',
        'after.set.append': 'cleanup.policy=delete,compact:DYNAMIC_TOPIC_CONFIG,retention.ms=3600000:DYNAMIC_TOPIC_CONFIG',
        'subtract.delete': 'OK', 'after.subtract.delete': altered,
        'unknown.key': refused, 'unknown.key.validate.only': refused, 'append.to.long': refused, 'bad.value': refused,
        'unknown.topic': 'UnknownTopicOrPartitionException', 'after.refusals': altered,
        'scram.first': 'alice=OK,bob=UnacceptableCredentialException,carol=UnacceptableCredentialException,'
                       'dave=ResourceNotFoundException',
        'scram.described': 'alice=[SCRAM_SHA_512:8192],bob=ResourceNotFoundException',
        'scram.second': 'alice=OK', 'scram.both': 'alice=[SCRAM_SHA_256:4096, SCRAM_SHA_512:8192]',
        'scram.twice': 'alice=DuplicateResourceException',
        'scram.listed': 'alice=[SCRAM_SHA_256:4096, SCRAM_SHA_512:8192]',
        'scram.delete': 'alice=OK', 'scram.after.delete': 'alice=[SCRAM_SHA_256:4096]',
        'scram.delete.last': 'alice=OK', 'scram.after.delete.last': 'alice=ResourceNotFoundException'}


def test_offset_delete_and_producer_introspection(java_client: list[str], bootstrap: str) -> None:
    """Admin.deleteConsumerGroupOffsets: an empty group's offsets are removed (a partition that does not exist:
    UnknownTopicOrPartitionException); a member subscribed to the topic keeps its offsets
    (GroupSubscribedToTopicException) but not another topic's; once it left they go; an unknown group:
    GroupIdNotFoundException. Then describeProducers of partitions written by an idempotent and a transactional
    producer, describeTransactions and listTransactions (state and producer id filters) of the open transaction and
    after its commit (transaction.version 2: the commit bumps the epoch); an unknown transactional id:
    TransactionalIdNotFoundException."""
    out = run(java_client, bootstrap, 'offsets-producers')
    idempotent = 'idempotent epoch=0 seq=2 txn-start=none coordinator-epoch=none timestamp=true'
    assert out == {
        'empty.delete': 't-0=OK,other-7=UnknownTopicOrPartitionException,all=UnknownTopicOrPartitionException',
        'empty.remaining': '[t-1=4]',
        'active.delete': 't-0=GroupSubscribedToTopicException,other-0=OK,all=GroupSubscribedToTopicException',
        'active.remaining': '[t-0=3, t-1=4]',
        'left.delete': 't-0=OK,all=OK', 'left.remaining': '[t-1=4]',
        'unknown.group.delete': 't-0=GroupIdNotFoundException,all=GroupIdNotFoundException',
        'txn.ongoing': 'ONGOING epoch=0 timeout=45000 started=true partitions=[t-0, t-1] coordinator=broker',
        'producers.ongoing':
            f't-0=[{idempotent}, transactional epoch=0 seq=1 txn-start=3 coordinator-epoch=none timestamp=true],'
            't-1=[transactional epoch=0 seq=0 txn-start=0 coordinator-epoch=none timestamp=true]',
        'listed.ongoing': 'ONGOING pid', 'listed.empty': 'none', 'listed.by.pid': 'ONGOING pid',
        'listed.other.pid': 'none', 'unknown.txn': 'TransactionalIdNotFoundException',
        'txn.committed': 'COMPLETE_COMMIT epoch=1 timeout=45000 started=true partitions=[] coordinator=broker',
        'producers.committed':
            f't-0=[{idempotent}, transactional epoch=1 seq=-1 txn-start=none coordinator-epoch=present timestamp=true],'
            't-1=[transactional epoch=1 seq=-1 txn-start=none coordinator-epoch=present timestamp=true]',
        'listed.committed': 'COMPLETE_COMMIT pid', 'listed.ongoing.after.commit': 'none'}
