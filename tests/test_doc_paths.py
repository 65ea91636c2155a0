"""Every repository path that README.md and docs/ name in backticks exists: a moved or deleted file is not left
cited as the place where something is done or tested."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / 'README.md', *sorted((ROOT / 'docs').glob('*.md')))
TOP_LEVEL = ('tests', 'integration', 'benchmarks', 'kafka_kip', 'kafka_kip_reference', 'examples', 'packaging',
             'docs', '.ci')
TOP_LEVEL_PATTERN = '|'.join(map(re.escape, TOP_LEVEL))
CITED = re.compile(rf'`((?:{TOP_LEVEL_PATTERN})/[^`\s]*)`')
# `tests/support/consuming.poll_records` names a function, not a file: only names with a file's suffix are paths
FILE_NAME = re.compile(r'\.(py|pyx|pxd|md|json|java|toml|cfg|txt|sh|go|js|properties|ya?ml)$')


def expand_braces(cited: str) -> list[str]:
    """``a/{b,c}.json`` -> ``['a/b.json', 'a/c.json']``, as a shell expands it."""
    group = re.search(r'\{([^{}]*)\}', cited)
    if group is None:
        return [cited]
    return [path for alternative in group.group(1).split(',')
            for path in expand_braces(cited[:group.start()] + alternative + cited[group.end():])]


def cited_paths(text: str) -> list[str]:
    """The file and directory paths ``text`` cites, test node ids cut to their file."""
    paths = [path for cited in CITED.findall(text) for path in expand_braces(cited.split('::')[0])]
    return [path for path in paths if path.endswith('/') or FILE_NAME.search(path)]


def test_cited_paths_are_expanded_and_cut_to_files():
    text = ('see `kafka_kip/protocol/X{Request,Response}.json`, `tests/a.py::test_b[c]`, `tests/support/`, '
            '`tests/support/consuming.poll_records` and `tests/*/test_kip253*.py`')
    assert cited_paths(text) == ['kafka_kip/protocol/XRequest.json', 'kafka_kip/protocol/XResponse.json',
                                 'tests/a.py', 'tests/support/', 'tests/*/test_kip253*.py']


def test_every_path_the_readme_and_docs_cite_exists():
    missing = [f'{doc.relative_to(ROOT)}: {path}' for doc in DOCS for path in cited_paths(doc.read_text())
               if not any(ROOT.glob(path.rstrip('/')))]
    assert missing == []
