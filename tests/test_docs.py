"""The first screen and the documentation: README.md stays short, and every relative link in
README.md and docs/*.md leads to a file that exists (and to a heading in it, for ``#anchor``
links, by GitHub's heading slugs)."""
import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, 'README.md')
MAX_README_LINES = 120
MAX_README_LINE = 200

_FENCE = re.compile(r'^\s*(```|~~~)')
# [text](target) or [text](target "title"); images too. Not inside inline code.
_LINK = re.compile(r'!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
_INLINE_CODE = re.compile(r'`[^`]*`')


def _prose_lines(path):
    """``(number, line)`` of the lines of a markdown file outside fenced code blocks."""
    with open(path, encoding='utf-8') as f:
        lines = f.read().splitlines()
    inside = False
    for number, line in enumerate(lines, 1):
        if _FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield number, line


def github_slug(heading):
    """The anchor GitHub gives a heading: lower case, punctuation (but ``-`` and ``_``)
    dropped, each space a ``-``.

    Parameters
    ----------
    heading : str
        The heading's text without the leading ``#``s.
    """
    text = heading.strip().lower().replace('`', '')
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(' ', '-')


def anchors(path):
    """The anchors of the headings of a markdown file, with GitHub's ``-1``, ``-2`` suffixes
    for repeated headings."""
    seen, found = {}, set()
    for _, line in _prose_lines(path):
        match = re.match(r'^#{1,6}\s+(.*?)\s*#*\s*$', line)
        if not match:
            continue
        slug = github_slug(match.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else '{}-{}'.format(slug, count))
    return found


def relative_links(path):
    """``(line number, target)`` of each link of a markdown file that is not a URL."""
    for number, line in _prose_lines(path):
        for target in _LINK.findall(_INLINE_CODE.sub('', line)):
            if not re.match(r'^[a-z][a-z0-9+.-]*:', target, re.I):  # http:, mailto:, ...
                yield number, target


def _markdown_files():
    return [README] + sorted(glob.glob(os.path.join(ROOT, 'docs', '*.md')))


def test_github_slug_examples():
    # headings of docs/ whose slugs GitHub shows (punctuation dropped, _ and - kept)
    assert github_slug('Several processes: one mechanism for torch.distributed and Horovod') == \
        'several-processes-one-mechanism-for-torchdistributed-and-horovod'
    assert github_slug('GluonCV YOLOv3 (`gluontrain.mx.yolo3`)') == \
        'gluoncv-yolov3-gluontrainmxyolo3'
    assert github_slug('Scene-Graph-Benchmark / maskrcnn-benchmark (`x`)') == \
        'scene-graph-benchmark--maskrcnn-benchmark-x'
    assert github_slug('Training (`tools/relation_train_net.py`)') == \
        'training-toolsrelation_train_netpy'


def test_repeated_headings_get_numbered_anchors(tmp_path):
    page = tmp_path / 'page.md'
    page.write_text('# T\n## Same\n```\n# not a heading\n```\n## Same\n## Same\n')
    assert anchors(str(page)) == {'t', 'same', 'same-1', 'same-2'}


def test_relative_links_skip_urls_code_and_fences(tmp_path):
    page = tmp_path / 'page.md'
    page.write_text('[a](a.md) [u](https://x.org/b.md) `[c](c.md)`\n```\n[d](d.md)\n```\n'
                    '[e](docs/e.md#part "title")\n')
    assert list(relative_links(str(page))) == [(1, 'a.md'), (5, 'docs/e.md#part')]


def test_readme_is_one_screen():
    with open(README, encoding='utf-8') as f:
        lines = f.read().splitlines()
    assert len(lines) <= MAX_README_LINES, 'README.md has {} lines; keep it to {}'.format(
        len(lines), MAX_README_LINES)
    long_lines = ['{}: {} characters'.format(n, len(line))
                  for n, line in enumerate(lines, 1) if len(line) > MAX_README_LINE]
    assert not long_lines, long_lines


@pytest.mark.parametrize('path', _markdown_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_every_relative_link_resolves(path):
    broken = []
    for number, target in relative_links(path):
        file_part, _, anchor = target.partition('#')
        linked = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
            if file_part else path
        where = '{}:{}: {}'.format(os.path.relpath(path, ROOT), number, target)
        if not os.path.exists(linked):
            broken.append(where + ' (no such file)')
        elif anchor and linked.endswith('.md') and anchor not in anchors(linked):
            broken.append(where + ' (no such heading)')
    assert not broken, '\n'.join(broken)


def test_readme_links_every_coming_from_page():
    with open(README, encoding='utf-8') as f:
        readme = f.read()
    for page in ('from_gluoncv', 'from_ssd_pytorch', 'from_seamseg', 'from_sgb'):
        assert '(docs/{}.md)'.format(page) in readme, page
