"""Where replicas live and who leads: ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments,
DescribeLogDirs and AlterReplicaLogDirs.

Each broker keeps its replicas in one log directory, in memory, named ``memory://broker-<id>``; moving a replica
to the directory it is in is a no-op (NONE), any other directory does not exist (LOG_DIR_NOT_FOUND), and its
volume size is unknown (-1).
"""
from __future__ import annotations

from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol import constants
from kafka_kip.protocol.messages import RESPONSES
from kafka_kip_reference.broker.context import RequestContext
from kafka_kip_reference.broker.model import ClusterError, Partition
from kafka_kip_reference.broker.registry import handles

PREFERRED, UNCLEAN = 0, 1
_MESSAGES = {constants.ELECTION_NOT_NEEDED: 'Leader election not needed for topic partition.'}
UNKNOWN_VOLUME_BYTES = -1


def log_dir(broker_id: int) -> str:
    """The one (in-memory) log directory of broker ``broker_id``."""
    return f'memory://broker-{broker_id}'


# -- ElectLeaders ---------------------------------------------------------------------------------------


@handles(ApiKey.ElectLeaders, 0, 2)
async def handle_elect_leaders(request: Any, ctx: RequestContext) -> Any:
    """PREFERRED (v0's only type) moves leadership to the first assigned replica; UNCLEAN gives a leaderless
    partition any live replica. Without a partition list, every partition that needs the election gets it."""
    response_class = RESPONSES[ApiKey.ElectLeaders]
    election = request.election_type if ctx.api_version >= 1 else PREFERRED
    if election not in (PREFERRED, UNCLEAN):
        return response_class(version=ctx.api_version, throttle_time_ms=0,
                              error_code=constants.INVALID_REQUEST, replica_election_results=[])
    state = ctx.cluster
    results: dict[str, list[Any]] = {}
    result_class = response_class.ReplicaElectionResult.PartitionResult
    if request.topic_partitions is None:
        wanted = [(p.topic, p.index) for t in state.topics.values() for p in t.partitions
                  if (p.leader != p.replicas[0] if election == PREFERRED else p.leader < 0)]
    else:
        wanted = [(t.topic, index) for t in request.topic_partitions for index in t.partitions]
    for topic, index in wanted:
        partition = state.partition(topic, index)
        if partition is None:
            error, message = constants.UNKNOWN_TOPIC_OR_PARTITION, f'No such partition as {topic}-{index}'
        else:
            error = (state.elect_preferred_leader if election == PREFERRED else state.elect_unclean_leader)(partition)
            message = _MESSAGES.get(error) if error else None
        results.setdefault(topic, []).append(result_class(partition_id=index, error_code=error, error_message=message))
    return response_class(version=ctx.api_version, throttle_time_ms=0, error_code=constants.NONE,
                          replica_election_results=[
        response_class.ReplicaElectionResult(topic=topic, partition_result=rows) for topic, rows in results.items()])


# -- AlterPartitionReassignments / ListPartitionReassignments --------------------------------------------


@handles(ApiKey.AlterPartitionReassignments, 0, 1)
async def handle_alter_partition_reassignments(request: Any, ctx: RequestContext) -> Any:
    response_class = RESPONSES[ApiKey.AlterPartitionReassignments]
    topic_class = response_class.ReassignableTopicResponse
    partition_class = topic_class.ReassignablePartitionResponse
    allow_factor_change = request.allow_replication_factor_change if ctx.api_version >= 1 else True
    topics = []
    for topic in request.topics:
        rows = []
        for wanted in topic.partitions:
            partition = ctx.cluster.partition(topic.name, wanted.partition_index)
            error, message = constants.NONE, None
            try:
                if partition is None:
                    raise ClusterError(constants.UNKNOWN_TOPIC_OR_PARTITION,
                                       f'unknown partition {topic.name}-{wanted.partition_index}')
                ctx.cluster.reassign(partition, None if wanted.replicas is None else list(wanted.replicas),
                                     allow_factor_change)
            except ClusterError as exc:
                error, message = exc.error_code, str(exc)
            rows.append(partition_class(partition_index=wanted.partition_index, error_code=error, error_message=message))
        topics.append(topic_class(name=topic.name, partitions=rows))
    return response_class(version=ctx.api_version, throttle_time_ms=0, allow_replication_factor_change=allow_factor_change,
                          error_code=constants.NONE, error_message=None, responses=topics)


@handles(ApiKey.ListPartitionReassignments, 0, 0)
async def handle_list_partition_reassignments(request: Any, ctx: RequestContext) -> Any:
    """The reassignments in progress (of the partitions asked about; unknown ones are left out, as on Kafka)."""
    state = ctx.cluster
    if request.topics is None:
        partitions = [p for t in state.topics.values() for p in t.partitions]
    else:
        partitions = [p for t in request.topics for i in t.partition_indexes
                      if (p := state.partition(t.name, i)) is not None]
    response_class = RESPONSES[ApiKey.ListPartitionReassignments]
    topic_class = response_class.OngoingTopicReassignment
    ongoing: dict[str, list[Any]] = {}
    for partition in partitions:
        if partition.reassignment is not None:
            ongoing.setdefault(partition.topic, []).append(topic_class.OngoingPartitionReassignment(
                partition_index=partition.index, replicas=list(partition.replicas),
                adding_replicas=partition.reassignment.adding, removing_replicas=partition.reassignment.removing))
    return response_class(version=ctx.api_version, throttle_time_ms=0, error_code=constants.NONE,
                          error_message=None,
                          topics=[topic_class(name=name, partitions=rows) for name, rows in ongoing.items()])


# -- DescribeLogDirs / AlterReplicaLogDirs ---------------------------------------------------------------


@handles(ApiKey.DescribeLogDirs, 1, 5)
async def handle_describe_log_dirs(request: Any, ctx: RequestContext) -> Any:
    """This broker's log directory and the replicas in it (size in bytes; lag behind the high watermark); v5's
    ``is_cordoned`` is false (nothing cordons a reference broker's directory)."""
    response_class = RESPONSES[ApiKey.DescribeLogDirs]
    result_class = response_class.DescribeLogDirsResult
    topic_class = result_class.DescribeLogDirsTopic
    wanted = None if request.topics is None else {(t.topic, p) for t in request.topics for p in t.partitions}
    hosted: dict[str, list[Any]] = {}
    for topic in ctx.cluster.topics.values():
        for partition in topic.partitions:
            log = partition.logs.get(ctx.broker_id)
            if log is None or (wanted is not None and (topic.name, partition.index) not in wanted):
                continue
            hosted.setdefault(topic.name, []).append(topic_class.DescribeLogDirsPartition(
                partition_index=partition.index, partition_size=log.size_in_bytes,
                offset_lag=max(0, log.high_watermark - log.log_end_offset), is_future_key=False))
    result = result_class(error_code=constants.NONE, log_dir=log_dir(ctx.broker_id),
                          topics=[topic_class(name=name, partitions=rows) for name, rows in hosted.items()],
                          total_bytes=UNKNOWN_VOLUME_BYTES, usable_bytes=UNKNOWN_VOLUME_BYTES, is_cordoned=False)
    return response_class(version=ctx.api_version, throttle_time_ms=0, error_code=constants.NONE,
                          results=[result])


@handles(ApiKey.AlterReplicaLogDirs, 1, 2)
async def handle_alter_replica_log_dirs(request: Any, ctx: RequestContext) -> Any:
    response_class = RESPONSES[ApiKey.AlterReplicaLogDirs]
    topic_class = response_class.AlterReplicaLogDirTopicResult
    results: dict[str, list[Any]] = {}
    for directory in request.dirs:
        for topic in directory.topics:
            for index in topic.partitions:
                results.setdefault(topic.name, []).append(topic_class.AlterReplicaLogDirPartitionResult(
                    partition_index=index, error_code=_move_error(ctx, directory.path, topic.name, index)))
    return response_class(version=ctx.api_version, throttle_time_ms=0, results=[
        topic_class(topic_name=name, partitions=rows) for name, rows in results.items()])


def _move_error(ctx: RequestContext, path: str, topic: str, index: int) -> int:
    if path != log_dir(ctx.broker_id):
        return constants.LOG_DIR_NOT_FOUND
    partition: Partition | None = ctx.cluster.partition(topic, index)
    if partition is None:
        return constants.UNKNOWN_TOPIC_OR_PARTITION
    if ctx.broker_id not in partition.logs:
        return constants.REPLICA_NOT_AVAILABLE
    return constants.NONE  # already there
