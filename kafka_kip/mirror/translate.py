"""Failing over yourself: source offsets translated to the target, exactly, from what the mirror keeps there.

MirrorMaker 2's precedent is ``RemoteClusterUtils.translateOffsets``, approximate on purpose (it
translates to the last offset sync at or below a committed offset, so a failed-over group re-reads
records). Here the translation is exact: the target offset of the first copied record at or after the
source offset, read from the mirror's offset map on the target (:mod:`kafka_kip.mirror.offset_map`) --
the same number where the mirror keeps offsets (broker and checked modes) -- and never beyond what is
on the target (its high watermark)::

    with OffsetTranslator(target_bootstrap) as translator:
        translator.translate(TopicPartition('orders', 0), 80)    # (TopicPartition('dr.orders', 0), 30)
        translator.translate_group(source_bootstrap, 'app')      # {TopicPartition('dr.orders', 0): (30, ...)}

Commit the result on the target (``KafkaConsumer.commit``) or ``seek`` to it.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka.net.selector import NetworkSelector
from kafka.structs import OffsetAndMetadata, TopicPartition

from kafka_kip.mirror.client import ClusterClient
from kafka_kip.mirror.groups import committed_offsets
from kafka_kip.mirror.lookups import Lookups
from kafka_kip.mirror.offset_map import MAP_TOPIC, OffsetMapStore, PartitionMap, translate_offset

_RETRY_BACKOFF_MS = 100
_TIMEOUT_MS = 30_000


class OffsetTranslator:
    """Translates source offsets to target offsets from the target's offset map (see the module doc).

    ``target_configs`` are kafka-python connection configs. The map is read once; :meth:`refresh` reads
    it again. A context manager (closes its connections).
    """

    def __init__(self, target: str, *, offset_map_topic: str = MAP_TOPIC,
                 target_configs: Mapping[str, Any] | None = None) -> None:
        self._net = NetworkSelector()
        self.target = ClusterClient('target', target, self._net, **dict(target_configs or {}))
        self._lookups = Lookups(self._net, _RETRY_BACKOFF_MS, _TIMEOUT_MS)
        try:
            self.target.bootstrap()
            self._store = OffsetMapStore(self.target, offset_map_topic)
            self.refresh()
        except BaseException:
            self.close()
            raise

    def refresh(self) -> None:
        """Read the offset map again."""
        self.maps = self._store.load()

    def target_of(self, source_tp: TopicPartition, target_topic: str | None = None) -> TopicPartition:
        """The target partition copying ``source_tp`` (``target_topic`` picks one when several mirrors copy it)."""
        found = [tp for tp, m in self.maps.items() if m.source == source_tp
                 and (target_topic is None or tp.topic == target_topic)]
        if len(found) != 1:
            where = f' to topic {target_topic!r}' if target_topic else ''
            raise ValueError(f'{source_tp.topic}-{source_tp.partition}: ' + (
                f'no mirror copies it{where} (per the offset map on the target)' if not found else
                f'several target partitions copy it ({sorted(found)}): name the target topic'))
        return found[0]

    def translate(self, source_tp: TopicPartition, offset: int, *, target_topic: str | None = None
                  ) -> tuple[TopicPartition, int]:
        """The target partition and the offset of the first record there at or after source ``offset``."""
        tp = self.target_of(source_tp, target_topic)
        return tp, self._translate(tp, self.maps[tp], offset)

    def translate_group(self, source: str, group: str, *, target_topic_prefix: str | None = None,
                        source_configs: Mapping[str, Any] | None = None) -> dict[TopicPartition, OffsetAndMetadata]:
        """``group``'s committed offsets on the ``source`` cluster, translated: ``{target partition: offset}``.

        Partitions no mirror copies to this target are left out. The leader epoch is -1 (unknown on the
        target); the commit metadata is kept.
        """
        client = ClusterClient('source', source, self._net, **dict(source_configs or {}))
        try:
            client.bootstrap()
            committed = committed_offsets(client, group)
        finally:
            client.close()
        out = {}
        for source_tp, offset in committed.items():
            candidates = [tp for tp, m in self.maps.items() if m.source == source_tp and
                          (target_topic_prefix is None or tp.topic == target_topic_prefix + source_tp.topic)]
            if len(candidates) == 1:
                tp = candidates[0]
                out[tp] = OffsetAndMetadata(self._translate(tp, self.maps[tp], offset.offset), offset.metadata, -1)
        return out

    def _translate(self, tp: TopicPartition, m: PartitionMap, offset: int) -> int:
        self.target.track_topics([tp.topic])
        end = self._net.run(self._lookups.high_watermark, self.target, tp)
        found = translate_offset(m.mode, m, offset, copied_to=offset, target_end=end)
        return end if found is None else found

    def close(self) -> None:
        self.target.close()
        self._net.close()

    def __enter__(self) -> OffsetTranslator:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
