"""``kafka-kip demo``: every scene runs, and the kafka_kip rows are measured clean from the logs."""
from __future__ import annotations

import io

from kafka.partitioner.default import murmur2

from kafka_kip_reference.demo import consistency as demo_consistency
from kafka_kip_reference.demo import expansion as demo_expansion
from kafka_kip_reference.demo.run import DemoResult, render_scoreboard, report


def test_demo_scores_the_kafka_kip_mirror_clean_on_a_kip391_target_and_on_a_stock_one(
        demo_run: tuple[DemoResult, list[str]]) -> None:
    result, lines = demo_run
    assert len(lines) == 20 and lines[-9] == 'fault 3: both replicators crashed mid-stream and restarted'
    assert lines[-7] == 'broker 2 lags again; the admin client grew events to 12 partitions'
    assert lines[-3] == ('kafka_kip (another process) / kafka_kip, group_protocol=consumer: t grew to 6 partitions '
                         'while the producer writes')
    assert [scene.stock for scene in result.scenes] == [False, True]
    for scene in result.scenes:
        kip = scene.kip
        assert (kip.lost, kip.duplicated, kip.offset_mismatches, kip.rewinds, kip.re_read, kip.skipped) == \
            (0, 0, 0, 0, 0, 0)
        # the unclean election is reported with the exact range the source lost
        partition, first_lost, end_lost = scene.truncation
        assert end_lost - first_lost == 40
        [incident] = scene.incidents
        assert (incident.kind, incident.source.partition, incident.stopped) == ('truncation', partition, False)
        assert (incident.lost, incident.truncated_at) == ((first_lost, end_lost), first_lost)
        assert kip.divergent_kept == 40
        # group app, switched to the target, reads the record it would have read next on the source
        assert [c.same_record for c in scene.groups] == [True] * 3
        assert all(c.source_offset > 0 for c in scene.groups)

    with_offsets, stock = result.scenes
    partition, first_lost, end_lost = with_offsets.truncation
    assert with_offsets.incidents[0].divergent == (first_lost, end_lost)
    # the new history of orders-1 follows the records it lost: translated offsets from there on
    assert with_offsets.incidents[0].continued_at == end_lost
    assert with_offsets.modes == ['broker', 'translated', 'broker']
    assert [c.target_offset for c in with_offsets.groups] == [c.source_offset for c in with_offsets.groups]
    # on the stock target the source's offset gap (120..144) makes the mirror translate offsets
    assert stock.modes == ['translated'] * 3
    divergent = stock.incidents[0].divergent
    assert divergent[1] - divergent[0] == 40  # in the target's numbering
    naive, mm2, kip = stock.scores
    assert (mm2.name, mm2.skipped, naive.offset_mismatches) == ('MirrorMaker 2 translation', 0, None)
    assert mm2.re_read > 0  # MM2's translation re-reads what the last offset sync leaves behind

    # through the lagging broker: kafka_kip's clients of another process see and use every partition
    stock_clients, kip_clients = result.lagging.rows
    assert (kip_clients.partitions_seen, kip_clients.sent, kip_clients.old_count) == (6, 60, 0)
    # kafka-python takes the lagging broker's word: no topic, then the old partition count for every key whose
    # partition changes with the count (its records, if any, went out before max_block_ms or not at all)
    keys = [f'user-{i}' for i in range(120)]
    changed = sum((murmur2(k.encode()) & 0x7FFFFFFF) % 12 >= 6 for k in keys)
    assert (stock_clients.partitions_seen, stock_clients.old_count) == (0, changed)
    assert stock_clients.sent in (0, 60)

    # through two partition expansions (tests/demo/test_kip253_expansion.py asserts the scene in full)
    assert result.expansion.clean and result.expansion.kip.sent == result.expansion.kip_consumer_protocol.sent == 9000

    out = io.StringIO()
    assert report(result, out) == 0
    text = out.getvalue()
    for scene in result.scenes:
        assert render_scoreboard(scene) in text
    assert demo_consistency.render(result.lagging) in text
    assert demo_expansion.render(result.expansion) in text
    assert 'kafka_kip mirror                              0           0                    0        0' \
           '                  0      0' in text
    assert f'reported truncation orders-1 (lost {first_lost}..{end_lost - 1}, divergent {first_lost}..' \
           f'{end_lost - 1})' in text
