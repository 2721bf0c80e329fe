"""Every relative link (and image) in ``README.md`` and ``docs/**/*.md`` resolves inside the
repository: the target file or folder exists and, for ``#anchor``, the target Markdown file has
a heading with that GitHub-style slug (or an HTML ``id``/``name``). Absolute ``http(s)`` and
``mailto`` links are not checked. Links in fenced code blocks and inline code are not links."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[2]

_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target "title") and ![alt](target); the text may hold one level of brackets.
_INLINE_LINK = re.compile(
    r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]*)(?:\s+\"[^\"]*\")?\s*\)"
)
_REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_ANCHOR = re.compile(r"""<a\s[^>]*?(?:name|id)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
_EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


class Link(NamedTuple):
    source: Path
    line: int
    target: str


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _prose_lines(text: str, *, code: bool = False) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, with inline code blanked out (kept: ``code``)."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line if code else _INLINE_CODE.sub("", line)))
    return lines


def links_in(path: Path) -> list[Link]:
    found = []
    for number, line in _prose_lines(path.read_text(encoding="utf-8")):
        targets = [m.group(1) for m in _INLINE_LINK.finditer(line)]
        definition = _REFERENCE_DEF.match(line)
        if definition is not None:
            targets.append(definition.group(1))
        found += [Link(path, number, t.strip("<>")) for t in targets if t.strip("<>")]
    return found


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the rendered text, lower case, punctuation dropped,
    spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link renders as its text
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors_of(path: Path) -> set[str]:
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in _prose_lines(path.read_text(encoding="utf-8"), code=True):
        anchors.update(m.group(1) for m in _HTML_ANCHOR.finditer(line))
        heading = _HEADING.match(line)
        if heading is None:
            continue
        base = slug(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        anchors.add(base if count == 0 else f"{base}-{count}")
    return anchors


def broken(link: Link) -> str | None:
    """Why ``link`` does not resolve inside the repository (None: it does, or is external)."""
    if _EXTERNAL.match(link.target) or link.target.startswith("//"):
        return None
    path_part, _, anchor = link.target.partition("#")
    path_part = unquote(path_part.split("?", 1)[0])
    target = (link.source.parent / path_part).resolve() if path_part else link.source
    if not target.is_relative_to(ROOT):
        return "points outside the repository"
    if not target.exists():
        return "no such file or folder"
    if anchor and target.suffix == ".md" and unquote(anchor).lower() not in anchors_of(target):
        return f"no heading #{anchor} in {target.relative_to(ROOT)}"
    return None


def test_every_relative_link_in_readme_and_docs_resolves() -> None:
    problems = [
        f"{link.source.relative_to(ROOT)}:{link.line}: ({link.target}) {why}"
        for path in markdown_files()
        for link in links_in(path)
        if (why := broken(link)) is not None
    ]
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_walk_sees_the_links_of_readme_and_docs() -> None:
    links = [link for path in markdown_files() for link in links_in(path)]
    sources = {link.source.name for link in links}
    assert {"README.md", "architecture.md"} <= sources
    assert any(link.target == "design.md" for link in links)


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("Packages and entry points", "packages-and-entry-points"),
        ("Removing a broker: `yak brokers`", "removing-a-broker-yak-brokers"),
        ("etcd in `yak up --secure`", "etcd-in-yak-up---secure"),
        ("Machines (pure: no asyncio, no I/O)", "machines-pure-no-asyncio-no-io"),
        ("Incremental fetch sessions (KIP-227)", "incremental-fetch-sessions-kip-227"),
        ("See [the API](rest-api.md) first", "see-the-api-first"),
    ],
)
def test_slugs_are_githubs(heading: str, expected: str) -> None:
    assert slug(heading) == expected


def test_a_missing_file_a_missing_anchor_and_an_escape_are_reported(tmp_path: Path) -> None:
    page = ROOT / "docs" / "architecture.md"
    assert broken(Link(page, 1, "design.md")) is None
    assert broken(Link(page, 1, "decisions.md#packages-and-entry-points")) is None
    assert broken(Link(page, 1, "https://example.invalid/nowhere")) is None
    assert broken(Link(page, 1, "no-such-page.md")) == "no such file or folder"
    assert broken(Link(page, 1, "design.md#no-such-heading")) is not None
    assert broken(Link(page, 1, "../../outside.md")) == "points outside the repository"


def test_links_in_code_are_not_links(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\nSee [a](a.md) and `[b](b.md)`.\n\n```\n[c](c.md)\n```\n![img](pic.png)\n"
        "[ref]: ref.md\n",
        encoding="utf-8",
    )
    assert [(link.line, link.target) for link in links_in(page)] == [
        (3, "a.md"),
        (8, "pic.png"),
        (9, "ref.md"),
    ]
    assert anchors_of(page) == {"title"}
    page.write_text("# Use `yak up`\n\n## Use `yak up`\n", encoding="utf-8")
    assert anchors_of(page) == {"use-yak-up", "use-yak-up-1"}
