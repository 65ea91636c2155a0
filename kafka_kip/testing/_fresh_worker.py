"""The child side of :mod:`kafka_kip.testing.fresh`: runs functions of a scenario file on request.

Run by path (``python _fresh_worker.py SCENARIO``), so it imports nothing of kafka_kip itself. Protocol: one
JSON object per line on stdin (``{"call": name, "args": [...]}``; ``{"call": null}`` ends), one JSON reply per
line on the original stdout (``{"result": ...}`` or ``{"error": ..., "traceback": ...}``); the last reply says
whether kafka_kip was imported. Whatever the scenario prints goes to stderr.
"""
import json
import os
import runpy
import sys
import traceback

replies = os.fdopen(os.dup(1), 'w', buffering=1)
os.dup2(2, 1)
sys.stdout = sys.stderr
namespace = runpy.run_path(sys.argv[1])
for line in sys.stdin:
    request = json.loads(line)
    if request['call'] is None:
        break
    try:
        reply = {'result': namespace[request['call']](*request['args'])}
    except BaseException as exc:  # reported to the parent, which raises it there
        reply = {'error': f'{type(exc).__name__}: {exc}', 'traceback': traceback.format_exc()}
    replies.write(json.dumps(reply) + '\n')
replies.write(json.dumps({'kafka_kip_imported': any(name == 'kafka_kip' or name.startswith('kafka_kip.')
                                                    for name in sys.modules)}) + '\n')
