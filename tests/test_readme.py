"""The README's API tour runs as printed."""
import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / 'README.md'


def _tour_blocks() -> tuple[str, str]:
    text = README.read_text()
    section = text[text.index('## API tour'):]
    code, printed = re.findall(r'```(?:python)?\n(.*?)```', section, flags=re.S)[:2]
    return code, printed


def test_api_tour_runs_and_prints_what_the_readme_says():
    code, printed = _tour_blocks()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(README), 'exec'), {'__name__': 'readme_tour'})
    assert out.getvalue() == printed


def _run_block_printing(section_title: str) -> tuple[str, str]:
    """(what the first python block of the section prints, what the section says it prints)."""
    text = README.read_text()
    section = text[text.index(section_title):]
    code = re.findall(r'```python\n(.*?)```', section, flags=re.S)[0]
    printed = re.search(r'prints `(.*?)`', section).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(README), 'exec'), {'__name__': 'readme_block'})
    return out.getvalue(), printed + '\n'


def test_reference_cluster_block_runs_and_prints_what_the_readme_says():
    got, said = _run_block_printing('### The reference cluster')
    assert got == said


def test_kip1243_block_runs_and_prints_what_the_readme_says():
    got, said = _run_block_printing('### Consistent metadata reads (KIP-1243)')
    assert got == said


def test_arrow_block_runs_and_prints_what_the_readme_says():
    arrow = pytest.importorskip('kafka_kip.arrow')
    if not hasattr(arrow, 'write_table'):  # kafka_kip/arrow/write.py (the write-encoder branch) wires it in
        pytest.skip('kafka_kip.arrow.write_table is not there yet')
    got, said = _run_block_printing('### Columnar reads and writes (`kafka_kip.arrow`)')
    assert got == said
