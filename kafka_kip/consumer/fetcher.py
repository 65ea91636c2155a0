"""The fetcher: kafka-python's, plus KIP-320 truncation handling and KIP-232 partition-epoch checks.

kafka-python already validates positions with OffsetForLeaderEpoch (KIP-320) and seeks to the divergence
point when a reset policy is set. Each override below adds one behaviour on top of it:

=============================================  =============================================================
``validate_offsets_if_needed``                 raise :class:`TruncatedPartitionError` (not kafka-python's
                                               ``LogTruncationError``) and let consumption go on afterwards
``_send_offset_for_leader_epoch_request``      a leader without a usable OffsetForLeaderEpoch: complete the
                                               validation unasked (as the Java consumer does)
``_handle_offset_for_leader_epoch_response``   hold a truncated partition until the application is told
``_create_fetch_requests``                    fetch by the topic id of the incarnation each position belongs
                                               to (KIP-516, :mod:`~kafka_kip.consumer.fetch_topic_ids`)
``_handle_fetch_response``                     name the topics of a response by topic id
``_parse_fetched_data``                        out of range: too low -> policy; too high -> validate first;
                                               a later partition incarnation -> InvalidPartitionEpochError;
                                               the topic id unknown to the broker -> hold until metadata says
``maybe_validate_positions``                   release positions held until metadata caught up (KIP-232);
                                               InvalidPartitionEpochError for epochs of another incarnation
                                               or not reached within ``offset_epoch_wait_ms``; release
                                               partitions whose expansion hold ended (KIP-253)
``_append``                                    remember the records handed out (commit timestamps); KIP-253:
                                               hold records written after a partition expansion that is not
                                               released, and records of epochs its expansions are not known at
``_send_list_offsets_request``                 'closest' reset by timestamp: no such record -> log end
``_handle_list_offsets_response``              offsets found carry their ``offset_epoch`` (KIP-232)
=============================================  =============================================================

Nothing is added per record: the fetch path touches each partition once per response or poll.
"""
from __future__ import annotations

import logging
import time
from typing import Any

import kafka.consumer.fetcher as _stock
from kafka.errors import (
    IncompatibleBrokerVersion,
    InconsistentTopicIdError,
    LogTruncationError,
    UnknownTopicIdError,
)
from kafka.protocol.consumer import OffsetForLeaderEpochRequest, OffsetResetStrategy
from kafka.structs import OffsetAndMetadata, TopicPartition

from kafka_kip.consumer.expansion import ExpansionOrder, Hold
from kafka_kip.consumer.fetch_topic_ids import TOPIC_ID_VERSION, TopicIdAddressing, known_topic_id
from kafka_kip.consumer.incarnation import (
    MetadataVerdict,
    cached_epochs,
    describe_epochs,
    fetched_verdict,
    position_verdict,
)
from kafka_kip.consumer.offset_epoch import OffsetEpoch
from kafka_kip.consumer.records import partition_records_class
from kafka_kip.consumer.reset import ResetCause, is_timestamp
from kafka_kip.consumer.subscription import PartitionState
from kafka_kip.errors import InvalidPartitionEpochError, TruncatedPartitionError
from kafka_kip.metadata.freshness import UNKNOWN_EPOCH, Epochs, is_new_incarnation
from kafka_kip.protocol.constants import INCONSISTENT_TOPIC_ID, OFFSET_OUT_OF_RANGE, UNKNOWN_TOPIC_ID
from kafka_kip.structs import OffsetAndTimestamp

log = logging.getLogger(__name__)

# A fetch by topic id: the broker does not know the id (deleted, or not known there yet) or its partition has
# another id by now (recreated).
_TOPIC_ID_ERRORS = {UNKNOWN_TOPIC_ID: UnknownTopicIdError, INCONSISTENT_TOPIC_ID: InconsistentTopicIdError}
# v2 is KIP-320's version (it names the current leader epoch, so a stale leader is fenced) and the oldest in
# kafka-python's own spec; v0 answers no epoch at all, which kafka-python would take for an undefined one and
# reset. (The Java consumer asks v3+, since brokers before 2.3 authorize v0-2 for ClusterAction only; v2 is
# answered by unsecured ones and by librdkafka's mock, which implements no later version.)
_FIRST_USABLE_OFFSET_FOR_LEADER_EPOCH_VERSION = 2


#: Default of the consumer's ``offset_epoch_wait_ms``.
DEFAULT_OFFSET_EPOCH_WAIT_MS = 30_000
_RESUME_HINT = ('If this cluster holds the same records at the same offsets (a mirror that kept them), resume '
                'with seek(tp, offset) without offset_epoch; otherwise the position does not exist here.')


def _drop(completed_fetch: Any) -> None:
    """Account for a fetched partition that is dropped unread (kafka-python's metrics expect every one)."""
    if completed_fetch.metric_aggregator:
        completed_fetch.metric_aggregator.record(completed_fetch.topic_partition, 0, 0)


def _held_position(tp: TopicPartition, state: PartitionState, leader_epoch: int) -> str:
    wanted = Epochs(leader_epoch, state.partition_epoch)
    return f'{tp.topic}-{tp.partition} at offset {state.position.offset} with epochs ({describe_epochs(wanted, state.topic_id)})'


def _recreated(tp: TopicPartition, state: PartitionState, here: str) -> InvalidPartitionEpochError:
    return InvalidPartitionEpochError(
        {tp: state.partition_epoch},
        f'{_held_position(tp, state, state.position.leader_epoch)} belongs to another incarnation of the partition '
        f'than this cluster\'s ({here}): the topic was deleted and recreated. {_RESUME_HINT}',
        topic_ids={tp: state.topic_id})


class Fetcher(_stock.Fetcher):
    """kafka-python's ``Fetcher`` with the consumer side of KIP-320 and KIP-232 (see the module docstring)."""

    DEFAULT_CONFIG = dict(_stock.Fetcher.DEFAULT_CONFIG, offset_epoch_wait_ms=DEFAULT_OFFSET_EPOCH_WAIT_MS)

    def __init__(self, client: Any, subscriptions: Any, **configs: Any) -> None:
        super().__init__(client, subscriptions, **configs)
        # The compiled record decoder when it is built (kafka_kip.consumer.records), else kafka-python's.
        self.PartitionRecords = partition_records_class()
        # Partitions already warned about being fetched unvalidated (the warning is once per partition).
        self._unvalidated_warned: set[TopicPartition] = set()
        self._topic_ids = TopicIdAddressing()
        #: KIP-253: the consumer's expansion order (the coordinator's; an inactive one until the consumer sets it)
        self.expansion_order = ExpansionOrder()

    # -- KIP-320: truncation --------------------------------------------------------------------------------

    def validate_offsets_if_needed(self, timeout_ms: int | None = None) -> Any:
        """kafka-python's validation step; detected truncation is raised as :class:`TruncatedPartitionError`.

        Raising it also lets the application go on without seeking: the truncated partitions fetch again
        from their current position, without the last-fetched epoch, so the same truncation is not
        reported twice.
        """
        try:
            return super().validate_offsets_if_needed(timeout_ms)
        except LogTruncationError as exc:
            raise self._acknowledge_truncation(exc.divergent_offsets) from None

    def _acknowledge_truncation(self, divergent: dict[TopicPartition, OffsetAndMetadata | None]
                                ) -> TruncatedPartitionError:
        for tp in divergent:
            state = self._subscriptions.assignment.get(tp)
            if state is not None and state.truncation_pending:
                state.continue_after_truncation()
        truncated = {tp: None if point is None else point.offset for tp, point in divergent.items()}
        return TruncatedPartitionError(truncated, divergent)

    async def _send_offset_for_leader_epoch_request(self, node_id: Any, partitions_to_positions: dict) -> dict:
        """kafka-python's OffsetForLeaderEpoch round trip, unless the leader cannot answer it.

        kafka-python sends it whatever the leader's ApiVersions say: a leader without the API (Tansu) fails it
        every time, kafka-python retries forever and the positions are never fetched again. As the Java
        consumer does, positions whose leader lacks the API or offers only versions too old to validate with
        (before v2) are taken as valid without asking; a leader change marks them for validation again.
        """
        # Connecting is what the send would do first; its errors are kafka-python's to retry.
        conn = self._manager.get_connection(node_id)
        await conn
        try:
            conn.broker_version_data.api_version(
                OffsetForLeaderEpochRequest, min_version=_FIRST_USABLE_OFFSET_FOR_LEADER_EPOCH_VERSION)
        except IncompatibleBrokerVersion as unusable:
            self._complete_without_validation(node_id, partitions_to_positions, unusable)
            return {}
        return await super()._send_offset_for_leader_epoch_request(node_id, partitions_to_positions)

    def _complete_without_validation(self, node_id: Any, partitions_to_positions: dict,
                                     reason: IncompatibleBrokerVersion) -> None:
        for tp, requested in partitions_to_positions.items():
            state = self._subscriptions.assignment.get(tp)
            if state is None or state.position != requested:
                continue  # positioned anew since the round began: that position gets its own round
            self._subscriptions.complete_validation(tp)
            if tp in self._unvalidated_warned:
                log.debug('Fetching %s at %s unvalidated: leader %s cannot answer OffsetForLeaderEpoch',
                          tp, requested, node_id)
            else:
                self._unvalidated_warned.add(tp)
                log.warning('Fetching %s at %s without validating the position (truncation below it goes '
                            'undetected): leader %s cannot answer OffsetForLeaderEpoch: %s',
                            tp, requested, node_id, reason)

    def _handle_offset_for_leader_epoch_response(self, response: Any, requested_positions: dict) -> dict:
        truncations = super()._handle_offset_for_leader_epoch_response(response, requested_positions)
        for tp in truncations:
            # Without a reset policy kafka-python completes validation and would fetch on at once; hold the
            # partition until poll() has raised the truncation to the application.
            if self._subscriptions.is_assigned(tp):
                self._subscriptions.assignment[tp].truncation_pending = True
        return truncations

    # -- the fetch path ----------------------------------------------------------------------------------

    def _create_fetch_requests(self) -> dict:
        """kafka-python's requests, each partition named by the topic id of the incarnation its position belongs
        to where the broker can be asked that way (KIP-516); a position not tied to one yet goes by the
        metadata's topic id, and the first answer ties it (:meth:`_parse_fetched_data`)."""
        self._hold_positions_of_other_incarnations()
        self._topic_ids.restart_changed_sessions(self._session_handlers, self._fetch_topic_id)
        requests = super()._create_fetch_requests()
        for node_id, (request, fetch_offsets) in requests.items():
            self._topic_ids.address(node_id, request, {tp: self._fetch_topic_id(tp) for tp in fetch_offsets})
        return requests

    def _hold_positions_of_other_incarnations(self) -> None:
        """Fetch nothing for a position tied to another topic id than the metadata's for its topic (the topic
        was recreated): it is held, and the next poll raises InvalidPartitionEpochError
        (:meth:`maybe_validate_positions`)."""
        cluster = self._manager.cluster
        for tp in self._subscriptions.fetchable_partitions():
            state = self._subscriptions.assignment[tp]
            if state.topic_id is not None and is_new_incarnation(cluster.topic_id(tp.topic), state.topic_id):
                state.hold_for_metadata()

    def _fetch_topic_id(self, tp: TopicPartition) -> Any:
        """The topic id ``tp`` is fetched by: its position's, else the cluster metadata's (None: unknown)."""
        state = self._subscriptions.assignment.get(tp)
        if state is not None and state.topic_id is not None:
            return state.topic_id
        return known_topic_id(self._manager.cluster.topic_id(tp.topic))

    def _handle_fetch_response(self, node_id: Any, fetch_offsets: dict, send_time: float, response: Any) -> None:
        if not self._topic_ids.name_topics(node_id, response):
            self._manager.cluster.request_update()  # an answer for a topic id it did not know: was it recreated?
        super()._handle_fetch_response(node_id, fetch_offsets, send_time, response)

    def _parse_fetched_data(self, completed_fetch: Any) -> Any:
        tp = completed_fetch.topic_partition
        # by topic id (v13+): the id the broker answered for; by name: the metadata's is the best guess
        answered_topic_id = self._topic_ids.answered_for(tp)
        if completed_fetch.response_version < TOPIC_ID_VERSION:
            answered_topic_id = known_topic_id(self._manager.cluster.topic_id(tp.topic))
        state = self._subscriptions.assignment.get(tp)
        position = None if state is None else state.position
        if (position is None or position.offset != completed_fetch.fetched_offset
                or not state.is_fetchable()):
            return super()._parse_fetched_data(completed_fetch)  # stale: kafka-python drops it
        data = completed_fetch.partition_data
        # Before kafka-python acts on the answer (reset, validation, records) it must come from the
        # incarnation the position belongs to.
        fetched_partition_epoch = getattr(data, 'partition_epoch', -1)
        verdict = fetched_verdict(state.partition_epoch, fetched_partition_epoch, state.topic_id, answered_topic_id)
        if verdict is not MetadataVerdict.CAUGHT_UP:
            # Another incarnation invalidates the position; an earlier one is a stale broker: drop it.
            _drop(completed_fetch)
            self._manager.cluster.request_update()
            if verdict is MetadataVerdict.RECREATED:
                state.hold_for_metadata()
                raise _recreated(tp, state, describe_epochs(Epochs(UNKNOWN_EPOCH, fetched_partition_epoch),
                                                            answered_topic_id))
            return None
        topic_id_error = _TOPIC_ID_ERRORS.get(data.error_code)
        if topic_id_error is not None:
            # The broker does not have the topic id fetched by (any more, or yet). A position tied to it waits
            # for metadata asked for after this answer, which tells whether the topic was recreated
            # (maybe_validate_positions); one not tied to an incarnation is fetched by that metadata's id.
            _drop(completed_fetch)
            refresh = self._manager.cluster.request_update()
            log.debug('Fetch of %s by topic id %s: %s', tp, answered_topic_id, topic_id_error.__name__)
            if state.topic_id is not None:
                state.hold_for_metadata(refresh)
            return None
        if state.partition_epoch < 0 <= fetched_partition_epoch:
            state.partition_epoch = fetched_partition_epoch
        if state.topic_id is None:
            state.topic_id = answered_topic_id  # the first answer ties the position to its incarnation
        if data.error_code == OFFSET_OUT_OF_RANGE and self._validate_instead_of_reset(tp, state, completed_fetch):
            return None
        try:
            return super()._parse_fetched_data(completed_fetch)
        finally:
            state.reset_cause = None

    def _validate_instead_of_reset(self, tp: TopicPartition, state: PartitionState, completed_fetch: Any) -> bool:
        """Out of range: name the cause for the policy table, or validate a position that is too high.

        Returns True if the response was answered by requesting validation (kafka-python must not reset).
        """
        if state.preferred_read_replica() is not None:
            return False  # kafka-python first retries from the leader (KIP-392)
        fetch_offset = completed_fetch.fetched_offset
        log_start = completed_fetch.partition_data.log_start_offset
        if log_start is not None and 0 <= log_start and fetch_offset < log_start:
            state.reset_cause = ResetCause.OUT_OF_RANGE_TOO_LOW
            return False
        # Above the log end: the log was truncated below us. With an epoch, OffsetForLeaderEpoch can tell
        # precisely where (once per position; if it cannot, the policy decides as for unknown truncation).
        if state.position.leader_epoch >= 0 and state.out_of_range_validated_at != fetch_offset:
            state.out_of_range_validated_at = fetch_offset
            log.info('Fetch offset %d is out of range for %s; validating it against the leader', fetch_offset, tp)
            state.request_position_validation()
            self._manager.cluster.request_update()
            return True
        state.reset_cause = ResetCause.UNKNOWN_TRUNCATION
        return False

    def _append(self, drained: dict, part: Any, max_records: int, update_offsets: bool) -> int:
        tp = part.topic_partition
        state = self._subscriptions.assignment.get(tp)
        before = None if state is None else state.position
        order = self.expansion_order
        hold = None
        if order.active and before is not None:
            hold = order.hold(tp, before.offset)
            if hold is not None and hold.offset <= before.offset:
                self._hold_at_expansion(tp, state, hold)
                part.drain()
                return 0
        taken = super()._append(drained, part, max_records, update_offsets)
        if taken and order.active:
            taken = self._cut_at_expansion(tp, state, drained, taken, hold, before, update_offsets, part)
        if taken:
            # poll() moves the position past all of them: the last one is enough; the iterator moves it one
            # record at a time, so keep the list (it is the one handed to the iterator anyway).
            records = drained[tp]
            state.remember_consumed(records[-1:] if update_offsets else records)
        elif before is not None and before.leader_epoch >= 0:
            # kafka-python rewrites the position after an empty fetch with the epoch of no batch (-1); the
            # position still follows the last consumed record, so it keeps that record's epoch.
            after = state.position
            if after is not None and after.offset == before.offset and after.leader_epoch < 0:
                state.position = before
        return taken

    # -- KIP-253: hold records written after a partition expansion ----------------------------------------

    def _cut_at_expansion(self, tp: TopicPartition, state: PartitionState, drained: dict, taken: int,
                          hold: Hold | None, before: OffsetAndMetadata, update_offsets: bool, part: Any) -> int:
        """Keep only the records just taken that precede ``hold`` and whose leader epoch the learned expansions
        cover; the position stops at the first one left out. Returns how many were kept."""
        records = drained[tp]
        known = self.expansion_order.known_epoch(tp)
        limit = hold.offset if hold is not None else None
        last = records[-1]
        if (limit is None or last.offset < limit) and (known is None or last.leader_epoch <= known):
            return taken  # (offsets and epochs only grow: the last record decides)
        start = len(records) - taken
        cut = next(i for i in range(start, len(records))
                   if (limit is not None and records[i].offset >= limit)
                   or (known is not None and records[i].leader_epoch > known))
        first_held = records[cut]
        if known is not None and first_held.leader_epoch > known and (limit is None or first_held.offset < limit):
            self.expansion_order.saw_epoch(tp.topic, first_held.leader_epoch)
            hold = Hold(first_held.offset, None, epoch=first_held.leader_epoch)
        kept = cut - start
        del records[cut:]
        if not records:
            del drained[tp]
        if update_offsets:
            epoch = records[-1].leader_epoch if kept else before.leader_epoch
            state.position = OffsetAndMetadata(first_held.offset, '', epoch)
        if update_offsets or not kept:
            # (the iterator moves the position record by record, asking is_fetchable() each time: a partition
            # it still hands records of is held by the next _append, at the first record left out)
            self._hold_at_expansion(tp, state, hold)
        part.drain()
        return kept

    def _hold_at_expansion(self, tp: TopicPartition, state: PartitionState, hold: Hold) -> None:
        if state.expansion_hold is None:
            log.info('Holding %s at offset %d: %s', tp, hold.offset, hold.describe(tp.topic))
        state.expansion_hold = hold

    def _release_expansion_holds(self) -> None:
        order = self.expansion_order
        for tp, state in self._subscriptions.partitions_held_at_expansions():
            position = state.position
            hold = None if position is None or not order.active else order.still_holds(tp, position.offset,
                                                                                         state.expansion_hold)
            if hold is None:
                log.info('Releasing %s at offset %s: %s', tp, None if position is None else position.offset,
                         'the records before its partition expansion are consumed' if order.active
                         else 'expansion ordering does not apply any more')
            state.expansion_hold = hold

    # -- KIP-232: hold positions until metadata caught up --------------------------------------------------

    def maybe_validate_positions(self) -> None:
        """Release positions whose epochs the metadata has reached, then kafka-python's validation marking.

        Raises :class:`InvalidPartitionEpochError` for positions whose epochs belong to another incarnation of
        the partition (a later partition epoch, or another topic id: the topic was recreated, or the epochs
        were taken on another cluster). Epochs the metadata has not reached are waited for at most
        ``offset_epoch_wait_ms`` (a warning names the partition as soon as the metadata is seen behind); then
        a position tied to an incarnation (partition epoch or topic id) raises InvalidPartitionEpochError, and
        one with only a leader epoch is validated against the current leader (KIP-320 decides). A position
        that raised stays held: every poll raises again until the application seeks.
        """
        invalid: dict[TopicPartition, str] = {}
        cluster = self._manager.cluster
        limit_ms = self.config['offset_epoch_wait_ms']
        for tp, state in self._subscriptions.partitions_held_for_metadata():
            waited_ms = (time.monotonic() - state.held_since) * 1000
            refresh = state.metadata_refresh
            if refresh is not None and not refresh.is_done and waited_ms < limit_ms:
                continue  # the metadata to compare with is the one asked for when the hold began
            cached, cached_topic_id = cached_epochs(cluster, tp), cluster.topic_id(tp.topic)
            wanted = Epochs(state.held_for_leader_epoch, state.partition_epoch)
            verdict = position_verdict(cached, cached_topic_id, wanted, state.topic_id)
            if verdict is MetadataVerdict.CAUGHT_UP:
                state.release(cached.leader_epoch)
                continue
            held = _held_position(tp, state, state.held_for_leader_epoch)
            here = describe_epochs(cached, cached_topic_id)
            if verdict is MetadataVerdict.RECREATED:
                invalid[tp] = (f'{held} belongs to another incarnation of the partition than this cluster\'s '
                               f'({here}): the topic was deleted and recreated, or the epochs were taken on '
                               'another cluster')
                continue
            tied = state.partition_epoch >= 0 or state.topic_id is not None
            if waited_ms < limit_ms:
                cluster.request_update()
                if cached is not None and not state.hold_reported:
                    state.hold_reported = True
                    log.warning('Holding %s until this cluster\'s metadata reaches those epochs (it has %s); '
                                'if it does not within offset_epoch_wait_ms=%d, %s', held, here, limit_ms,
                                'poll() raises InvalidPartitionEpochError' if tied
                                else 'the position is validated against the current leader')
            elif tied:
                invalid[tp] = (f'{held}: this cluster\'s metadata has not reached those epochs within '
                               f'offset_epoch_wait_ms={limit_ms} ({here}): the epochs were taken on another '
                               'cluster, or the metadata is stuck')
            else:
                log.warning('Validating %s against the current leader: this cluster\'s metadata has not reached '
                            'its leader epoch within offset_epoch_wait_ms=%d (%s)', held, limit_ms, here)
                state.release(-1 if cached is None else cached.leader_epoch)
        if invalid:
            states = {tp: self._subscriptions.assignment[tp] for tp in invalid}
            raise InvalidPartitionEpochError(
                {tp: state.partition_epoch for tp, state in states.items()},
                '; '.join(invalid[tp] for tp in sorted(invalid)) + '. ' + _RESUME_HINT,
                topic_ids={tp: state.topic_id for tp, state in states.items()})
        self._release_expansion_holds()
        super().maybe_validate_positions()

    # -- KIP-320 'closest': reset by timestamp -------------------------------------------------------------

    async def _send_list_offsets_request(self, node_id: Any, timestamps_and_epochs: dict) -> tuple[dict, set]:
        fetched, retry = await super()._send_list_offsets_request(node_id, timestamps_and_epochs)
        for tp, (timestamp, _epoch) in timestamps_and_epochs.items():
            if is_timestamp(timestamp) and tp not in fetched and tp not in retry:
                # No record at or after the timestamp: the closest offset is the log end offset.
                self._fall_back_to_log_end(tp, timestamp)
        return fetched, retry

    def _handle_list_offsets_response(self, response: Any) -> tuple[dict, set]:
        """kafka-python's answer, each offset found as :class:`kafka_kip.OffsetAndTimestamp` with its
        ``offset_epoch``: the leader epoch of the record found, the partition epoch the broker reports for
        it (kip.232) and the topic id of the cluster metadata."""
        fetched, retry = super()._handle_list_offsets_response(response)
        partition_epochs = {(topic.name, p.partition_index): getattr(p, 'partition_epoch', -1)
                            for topic in response.topics for p in topic.partitions}
        cluster = self._manager.cluster
        for tp, found in fetched.items():
            epoch = OffsetEpoch(found.leader_epoch, partition_epochs[tp.topic, tp.partition], cluster.topic_id(tp.topic))
            fetched[tp] = OffsetAndTimestamp(found.offset, found.timestamp, found.leader_epoch,
                                             offset_epoch=epoch.to_bytes())
        return fetched, retry

    def _fall_back_to_log_end(self, tp: TopicPartition, timestamp: int) -> None:
        state = self._subscriptions.assignment.get(tp)
        if state is not None and state.awaiting_reset and state.reset_strategy == timestamp:
            self._subscriptions.request_offset_reset(tp, OffsetResetStrategy.LATEST)
