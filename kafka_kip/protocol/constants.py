"""The protocol's shared vocabulary: error codes, "unknown" sentinels, ListOffsets timestamps, isolation levels.

Error codes are named as in Apache Kafka's ``Errors`` and taken from kafka-python's (or kafka_kip's extension)
exception classes, so a code is never spelt as a bare number. Clients, the mirror and the reference cluster
all import them from here.
"""
from __future__ import annotations

import kafka.errors as _e

from kafka_kip import errors as _ext

# -- sentinels -------------------------------------------------------------------------------------------

#: A leader or partition epoch that is not known (Kafka's ``RecordBatch.NO_PARTITION_LEADER_EPOCH``,
#: ``LeaderEpochFileCache.UNDEFINED_EPOCH``).
UNKNOWN_EPOCH = -1
#: An offset that is not known (Kafka's ``UNDEFINED_EPOCH_OFFSET``, ``ListOffsetsResponse.UNKNOWN_OFFSET``).
UNKNOWN_OFFSET = -1
#: No idempotent producer (Kafka's ``RecordBatch.NO_PRODUCER_ID`` / ``NO_PRODUCER_EPOCH``).
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: A batch or record without a timestamp (Kafka's ``RecordBatch.NO_TIMESTAMP``).
NO_TIMESTAMP = -1

# -- ListOffsets timestamps (Kafka's ``ListOffsetsRequest``) ----------------------------------------------

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6

# -- isolation levels of Fetch and ListOffsets -----------------------------------------------------------

READ_UNCOMMITTED = 0
READ_COMMITTED = 1

# -- error codes -----------------------------------------------------------------------------------------

NONE = _e.NoError.errno
UNKNOWN_SERVER_ERROR = _e.UnknownError.errno
OFFSET_OUT_OF_RANGE = _e.OffsetOutOfRangeError.errno
OFFSET_NOT_AVAILABLE = _e.OffsetNotAvailableError.errno
CORRUPT_MESSAGE = _e.CorruptRecordError.errno
UNKNOWN_TOPIC_OR_PARTITION = _e.UnknownTopicOrPartitionError.errno
LEADER_NOT_AVAILABLE = _e.LeaderNotAvailableError.errno
NOT_LEADER_OR_FOLLOWER = _e.NotLeaderForPartitionError.errno
BROKER_NOT_AVAILABLE = _e.BrokerNotAvailableError.errno
MESSAGE_TOO_LARGE = _e.MessageSizeTooLargeError.errno
INVALID_TOPIC_EXCEPTION = _e.InvalidTopicError.errno
NOT_ENOUGH_REPLICAS = _e.NotEnoughReplicasError.errno
INVALID_REQUIRED_ACKS = _e.InvalidRequiredAcksError.errno
CLUSTER_AUTHORIZATION_FAILED = _e.ClusterAuthorizationFailedError.errno
TOPIC_AUTHORIZATION_FAILED = _e.TopicAuthorizationFailedError.errno
GROUP_AUTHORIZATION_FAILED = _e.GroupAuthorizationFailedError.errno
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = _e.TransactionalIdAuthorizationFailedError.errno
SECURITY_DISABLED = _e.SecurityDisabledError.errno
UNSUPPORTED_SASL_MECHANISM = _e.UnsupportedSaslMechanismError.errno
ILLEGAL_SASL_STATE = _e.IllegalSaslStateError.errno
UNSUPPORTED_VERSION = _e.UnsupportedVersionError.errno
TOPIC_ALREADY_EXISTS = _e.TopicAlreadyExistsError.errno
TOPIC_DELETION_DISABLED = _e.TopicDeletionDisabledError.errno
INVALID_PARTITIONS = _e.InvalidPartitionsError.errno
INVALID_REPLICATION_FACTOR = _e.InvalidReplicationFactorError.errno
INVALID_REPLICA_ASSIGNMENT = _e.InvalidReplicationAssignmentError.errno
INVALID_CONFIG = _e.InvalidConfigurationError.errno
INVALID_REQUEST = _e.InvalidRequestError.errno
POLICY_VIOLATION = _e.PolicyViolationError.errno
OPERATION_NOT_ATTEMPTED = _e.OperationNotAttemptedError.errno
OUT_OF_ORDER_SEQUENCE_NUMBER = _e.OutOfOrderSequenceNumberError.errno
DUPLICATE_SEQUENCE_NUMBER = _e.DuplicateSequenceNumberError.errno
INVALID_PRODUCER_EPOCH = _e.InvalidProducerEpochError.errno
UNKNOWN_PRODUCER_ID = _e.UnknownProducerIdError.errno
SASL_AUTHENTICATION_FAILED = _e.SaslAuthenticationFailedError.errno
RESOURCE_NOT_FOUND = _e.ResourceNotFoundError.errno
DUPLICATE_RESOURCE = _e.DuplicateResourceError.errno
UNACCEPTABLE_CREDENTIAL = _e.UnacceptableCredentialError.errno
FETCH_SESSION_ID_NOT_FOUND = _e.FetchSessionIdNotFoundError.errno
COORDINATOR_NOT_AVAILABLE = _e.CoordinatorNotAvailableError.errno
NOT_COORDINATOR = _e.NotCoordinatorError.errno
FENCED_LEADER_EPOCH = _e.FencedLeaderEpochError.errno
UNKNOWN_LEADER_EPOCH = _e.UnknownLeaderEpochError.errno
ELIGIBLE_LEADERS_NOT_AVAILABLE = _e.EligibleLeadersNotAvailableError.errno
ELECTION_NOT_NEEDED = _e.ElectionNotNeededError.errno
PREFERRED_LEADER_NOT_AVAILABLE = _e.PreferredLeaderNotAvailableError.errno
NO_REASSIGNMENT_IN_PROGRESS = _e.NoReassignmentInProgressError.errno
LOG_DIR_NOT_FOUND = _e.LogDirNotFoundError.errno
REPLICA_NOT_AVAILABLE = _e.ReplicaNotAvailableError.errno
INVALID_RECORD = _e.InvalidRecordError.errno
INVALID_TIMESTAMP = _e.InvalidTimestampError.errno
UNKNOWN_TOPIC_ID = _e.UnknownTopicIdError.errno
INCONSISTENT_TOPIC_ID = _e.InconsistentTopicIdError.errno
MEMBER_ID_REQUIRED = _e.MemberIdRequiredError.errno
INCONSISTENT_CLUSTER_ID = _e.InconsistentClusterIdError.errno
INVALID_TXN_STATE = _e.InvalidTxnStateError.errno
TRANSACTION_ABORTABLE = _e.TransactionAbortableError.errno
#: Kafka 4.4's answer to an ApiVersions v5 naming another cluster or node (KIP-1242); kafka-python has no class
REBOOTSTRAP_REQUIRED = 129
# the extension codes (kafka_kip.errors.EXTENSION_ERRORS)
INVALID_PRODUCE_OFFSET = _ext.InvalidProduceOffsetError.errno
STALE_METADATA = _ext.StaleMetadataError.errno
INVALID_PARTITION_COUNT = _ext.InvalidPartitionCountError.errno
