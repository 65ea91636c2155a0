"""``kafka-kip demo``: the scenario runs, and the kafka_kip row is measured clean from the logs."""
from __future__ import annotations

import io

from kafka_kip.demo import render_scoreboard, report, run_scenario


def test_demo_scenario_scores_the_kafka_kip_mirror_clean() -> None:
    lines: list[str] = []
    result = run_scenario(lines.append)
    assert len(lines) == 6 and lines[-1] == 'fault 3: both replicators crashed mid-stream and restarted'

    kip = result.kip
    assert (kip.lost, kip.duplicated, kip.offset_mismatches, kip.rewinds) == (0, 0, 0, 0)
    # the unclean election is reported with the exact range the source lost
    partition, first_lost, end_lost = result.truncation
    assert end_lost - first_lost == 40
    [incident] = result.incidents
    assert (incident.kind, incident.source.partition, incident.stopped) == ('truncation', partition, False)
    assert (incident.lost, incident.divergent, incident.truncated_at) == \
        ((first_lost, end_lost), (first_lost, end_lost), first_lost)
    assert kip.divergent_kept == 40
    # group app, switched to the target, resumes where it was on the source, at the same record
    assert [(c.partition, c.target_offset, c.same_record) for c in result.groups] == \
        [(p, c.source_offset, True) for p, c in enumerate(result.groups)]
    assert all(c.source_offset > 0 for c in result.groups)

    out = io.StringIO()
    assert report(result, out) == 0
    text = out.getvalue()
    assert render_scoreboard(result) in text
    assert 'kafka_kip mirror                              0           0                  0        0' in text
    assert f'reported truncation orders-1 (lost {first_lost}..{end_lost - 1}, divergent {first_lost}..' \
           f'{end_lost - 1})' in text
