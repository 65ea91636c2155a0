"""Resume points for ``offset_mode='off'``, where the target's offsets say nothing about the source's.

Each entry is ``(source_next, target_end)``: every source record below ``source_next`` was on the target
when the target's end offset was ``target_end``. Records the target gained after that are the next
source records (the mirror is the target partition's only writer), so a restart skips that many and
never writes a record twice. The file is JSON, replaced atomically.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping

from kafka.structs import TopicPartition

_VERSION = 1


def load_checkpoint(path: str) -> dict[TopicPartition, tuple[int, int]]:
    """The entries of the checkpoint file at ``path`` (empty if it does not exist)."""
    try:
        with open(path, encoding='utf-8') as handle:
            data = json.load(handle)
    except FileNotFoundError:
        return {}
    if data.get('version') != _VERSION:
        raise ValueError(f'{path}: unsupported checkpoint version {data.get("version")!r}')
    out = {}
    for key, entry in data['partitions'].items():
        topic, _, partition = key.rpartition(':')
        out[TopicPartition(topic, int(partition))] = (int(entry['source_next']), int(entry['target_end']))
    return out


def save_checkpoint(path: str, entries: Mapping[TopicPartition, tuple[int, int]]) -> None:
    """Write ``entries`` to ``path`` atomically (a reader sees the old or the new file, never a mix)."""
    data = {'version': _VERSION, 'partitions': {
        f'{tp.topic}:{tp.partition}': {'source_next': source_next, 'target_end': target_end}
        for tp, (source_next, target_end) in sorted(entries.items())}}
    temporary = f'{path}.tmp'
    with open(temporary, 'w', encoding='utf-8') as handle:
        json.dump(data, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
