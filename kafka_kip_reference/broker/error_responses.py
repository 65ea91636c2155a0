"""A whole request answered with one error code, as Kafka's ``AbstractRequest.getErrorResponse`` does.

For a request the broker refuses before its handler runs (KIP-1243: INCONSISTENT_CLUSTER_ID, STALE_METADATA).
A response with a top-level error code carries the code there; the others mirror the request's topics and
partitions (resources, groups, coordinator keys) with the code on every one. Fields not named take their
defaults, offsets -1.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka.protocol.api_key import ApiKey

from kafka_kip.protocol.messages import RESPONSES

_Mirror = Callable[[Any, int, int, 'str | None'], dict[str, Any]]


def error_response(api_key: int, version: int, request: Any, error_code: int, message: str | None = None,
                   **fields: Any) -> Any:
    """The response of ``request`` (API ``api_key`` at ``version``) refused with ``error_code`` everywhere.

    ``fields`` set top-level fields of the response besides the error (e.g. Metadata's ``cluster_id``; given
    ``topics`` replace the mirrored ones). Raises LookupError for an API this module has no error response for.
    """
    response_class = RESPONSES[api_key]
    struct_fields = response_class._struct.fields
    mirror = _MIRRORS.get(api_key)
    top_level = 'error_code' in struct_fields and struct_fields['error_code'].for_version_q(version)
    if top_level:
        fields['error_code'] = error_code
        if 'error_message' in struct_fields and struct_fields['error_message'].for_version_q(version):
            fields['error_message'] = message
    elif mirror is not None:
        fields = {**mirror(request, version, error_code, message), **fields}
    else:
        raise LookupError(f'no error response for api {api_key} v{version}')
    return response_class(version=version, **fields)


def _each_partition(api_key: int, response_field: str, path: str, *, request_topics: str = 'topics',
                    request_partitions: str = 'partitions', partitions: str = 'partitions',
                    index: str = 'partition_index', request_index: str = 'partition_index', topic_name: str = 'name',
                    **partition_fields: Any) -> _Mirror:
    """Mirror every partition of every topic of the request into ``response_field``.

    ``path`` names the response's topic and partition classes (``'Topic.Partition'``, nested in the response
    class); the other names are the fields that differ between APIs; ``partition_fields`` are set on every
    partition besides the error code.
    """
    topic_path, partition_path = path.split('.')
    topic_class = getattr(RESPONSES[api_key], topic_path)
    partition_class = getattr(topic_class, partition_path)

    def mirror(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
        return {response_field: [
            topic_class(**{topic_name: getattr(topic, topic_name), partitions: [
                partition_class(**{index: getattr(p, request_index)}, error_code=error_code, **partition_fields)
                for p in getattr(topic, request_partitions)]})
            for topic in getattr(request, request_topics) or ()]}
    return mirror


def _add_partitions_to_txn(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
    topic = RESPONSES[ApiKey.AddPartitionsToTxn].AddPartitionsToTxnTopicResult
    return {'results_by_topic_v3_and_below': [
        topic(name=t.name, results_by_partition=[topic.AddPartitionsToTxnPartitionResult(
            partition_index=p, partition_error_code=error_code) for p in t.partitions])
        for t in request.v3_and_below_topics]}


def _alter_replica_log_dirs(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
    topic = RESPONSES[ApiKey.AlterReplicaLogDirs].AlterReplicaLogDirTopicResult
    return {'results': [topic(topic_name=t.name, partitions=[topic.AlterReplicaLogDirPartitionResult(
        partition_index=p, error_code=error_code) for p in t.partitions]) for d in request.dirs for t in d.topics]}


def _describe_log_dirs(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
    result = RESPONSES[ApiKey.DescribeLogDirs].DescribeLogDirsResult
    return {'results': [result(error_code=error_code, log_dir='', topics=[])]}


def _describe_topic_partitions(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
    topic = RESPONSES[ApiKey.DescribeTopicPartitions].DescribeTopicPartitionsResponseTopic
    return {'topics': [topic(error_code=error_code, name=t.name, partitions=[]) for t in request.topics]}


def _metadata(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
    topic = RESPONSES[ApiKey.Metadata].MetadataResponseTopic
    return {'topics': [topic(error_code=error_code, name=t.name, topic_id=t.topic_id, partitions=[])
                       for t in request.topics or ()]}


def _offset_fetch(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
    group = RESPONSES[ApiKey.OffsetFetch].OffsetFetchResponseGroup
    return {'groups': [group(group_id=g.group_id, error_code=error_code, topics=[]) for g in request.groups]}


def _find_coordinator(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
    coordinator = RESPONSES[ApiKey.FindCoordinator].Coordinator
    return {'coordinators': [coordinator(key=key, node_id=-1, host='', port=-1, error_code=error_code,
                                         error_message=message) for key in request.coordinator_keys]}


def _describe_groups(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
    described = RESPONSES[ApiKey.DescribeGroups].DescribedGroup
    return {'groups': [described(error_code=error_code, group_id=g, group_state='', protocol_type='',
                                 protocol_data='', members=[]) for g in request.groups]}


def _consumer_group_describe(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
    described = RESPONSES[ApiKey.ConsumerGroupDescribe].DescribedGroup
    return {'groups': [described(error_code=error_code, error_message=message, group_id=g, group_state='',
                                 group_epoch=-1, assignment_epoch=-1, assignor_name='', members=[])
                       for g in request.group_ids]}


def _create_topics(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
    result = RESPONSES[ApiKey.CreateTopics].CreatableTopicResult
    return {'topics': [result(name=t.name, error_code=error_code, error_message=message, num_partitions=-1,
                              replication_factor=-1, configs=None) for t in request.topics]}


def _delete_topics(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
    result = RESPONSES[ApiKey.DeleteTopics].DeletableTopicResult
    if request.topics:  # v6+: names or topic ids
        return {'responses': [result(name=t.name, topic_id=t.topic_id, error_code=error_code, error_message=message)
                              for t in request.topics]}
    return {'responses': [result(name=name, error_code=error_code, error_message=message)
                          for name in request.topic_names or ()]}


def _describe_configs(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
    result = RESPONSES[ApiKey.DescribeConfigs].DescribeConfigsResult
    return {'results': [result(error_code=error_code, error_message=message, resource_type=r.resource_type,
                               resource_name=r.resource_name, configs=[]) for r in request.resources]}


def _alter_configs(api_key: int) -> _Mirror:
    def mirror(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
        result = RESPONSES[api_key].AlterConfigsResourceResponse
        return {'responses': [result(error_code=error_code, error_message=message, resource_type=r.resource_type,
                                     resource_name=r.resource_name) for r in request.resources]}
    return mirror


def _create_partitions(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
    result = RESPONSES[ApiKey.CreatePartitions].CreatePartitionsTopicResult
    return {'results': [result(name=t.name, error_code=error_code, error_message=message) for t in request.topics]}


def _delete_groups(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
    result = RESPONSES[ApiKey.DeleteGroups].DeletableGroupResult
    return {'results': [result(group_id=g, error_code=error_code) for g in request.groups_names]}


def _create_acls(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
    result = RESPONSES[ApiKey.CreateAcls].AclCreationResult
    return {'results': [result(error_code=error_code, error_message=message) for _ in request.creations]}


def _delete_acls(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
    result = RESPONSES[ApiKey.DeleteAcls].DeleteAclsFilterResult
    return {'filter_results': [result(error_code=error_code, error_message=message, matching_acls=[])
                               for _ in request.filters]}


def _alter_client_quotas(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
    entry = RESPONSES[ApiKey.AlterClientQuotas].EntryData
    return {'entries': [entry(error_code=error_code, error_message=message, entity=[
        entry.EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in requested.entity])
        for requested in request.entries]}


def _alter_user_scram_credentials(request: Any, version: int, error_code: int, message: str | None
                                  ) -> dict[str, Any]:
    result = RESPONSES[ApiKey.AlterUserScramCredentials].AlterUserScramCredentialsResult
    users = sorted({a.name for a in request.deletions} | {a.name for a in request.upsertions})
    return {'results': [result(user=user, error_code=error_code, error_message=message) for user in users]}


def _describe_producers(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
    topic = RESPONSES[ApiKey.DescribeProducers].TopicResponse
    return {'topics': [topic(name=t.name, partitions=[topic.PartitionResponse(
        partition_index=p, error_code=error_code, error_message=message, active_producers=[])
        for p in t.partition_indexes]) for t in request.topics]}


def _describe_transactions(request: Any, version: int, error_code: int, message: str | None) -> dict[str, Any]:
    state = RESPONSES[ApiKey.DescribeTransactions].TransactionState
    return {'transaction_states': [state(error_code=error_code, transactional_id=tid, transaction_state='',
                                         transaction_timeout_ms=0, transaction_start_time_ms=0, producer_id=0,
                                         producer_epoch=0, topics=[]) for tid in request.transactional_ids]}


#: APIs whose responses (at some versions) have no top-level error code: how they mirror the request.
_MIRRORS: dict[int, _Mirror] = {
    ApiKey.Produce: _each_partition(ApiKey.Produce, 'responses', 'TopicProduceResponse.PartitionProduceResponse',
                                    request_topics='topic_data', request_partitions='partition_data',
                                    partitions='partition_responses', index='index', request_index='index',
                                    base_offset=-1),
    ApiKey.ListOffsets: _each_partition(ApiKey.ListOffsets, 'topics',
                                        'ListOffsetsTopicResponse.ListOffsetsPartitionResponse', offset=-1),
    ApiKey.Metadata: _metadata,
    ApiKey.OffsetCommit: _each_partition(ApiKey.OffsetCommit, 'topics',
                                         'OffsetCommitResponseTopic.OffsetCommitResponsePartition'),
    ApiKey.OffsetFetch: _offset_fetch,
    ApiKey.FindCoordinator: _find_coordinator,
    ApiKey.DescribeGroups: _describe_groups,
    ApiKey.ConsumerGroupDescribe: _consumer_group_describe,
    ApiKey.CreateTopics: _create_topics,
    ApiKey.DeleteTopics: _delete_topics,
    ApiKey.DeleteRecords: _each_partition(ApiKey.DeleteRecords, 'topics',
                                          'DeleteRecordsTopicResult.DeleteRecordsPartitionResult', low_watermark=-1),
    ApiKey.OffsetForLeaderEpoch: _each_partition(ApiKey.OffsetForLeaderEpoch, 'topics',
                                                 'OffsetForLeaderTopicResult.EpochEndOffset', index='partition',
                                                 request_index='partition', topic_name='topic', end_offset=-1),
    ApiKey.DescribeConfigs: _describe_configs,
    ApiKey.AlterConfigs: _alter_configs(ApiKey.AlterConfigs),
    ApiKey.IncrementalAlterConfigs: _alter_configs(ApiKey.IncrementalAlterConfigs),
    ApiKey.CreatePartitions: _create_partitions,
    ApiKey.DeleteGroups: _delete_groups,
    ApiKey.AddPartitionsToTxn: _add_partitions_to_txn,
    ApiKey.TxnOffsetCommit: _each_partition(ApiKey.TxnOffsetCommit, 'topics',
                                            'TxnOffsetCommitResponseTopic.TxnOffsetCommitResponsePartition'),
    ApiKey.AlterReplicaLogDirs: _alter_replica_log_dirs,
    ApiKey.DescribeLogDirs: _describe_log_dirs,
    ApiKey.DescribeTopicPartitions: _describe_topic_partitions,
    ApiKey.CreateAcls: _create_acls,
    ApiKey.DeleteAcls: _delete_acls,
    ApiKey.AlterClientQuotas: _alter_client_quotas,
    ApiKey.AlterUserScramCredentials: _alter_user_scram_credentials,
    ApiKey.DescribeTransactions: _describe_transactions,
    ApiKey.DescribeProducers: _describe_producers,
}

__all__ = ['error_response']
