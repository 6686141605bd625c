"""The README and docs/: every link and picture resolves, every page of the app has its picture, pictures stay
small, and the README's first screen says how to start the app and shows it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.helpers import ROOT

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
START = ".venv/bin/pip install -r requirements.txt && .venv/bin/python -m app.serve"
TEST = ".venv/bin/pip install --no-compile -r requirements-dev.txt && .venv/bin/python -m pytest"


def _links(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold examples, not links
    return LINK.findall(text)


def _anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    out = set()
    for title in re.findall(r"^#{1,6} (.+)$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_every_relative_link_and_picture_resolves(doc: Path) -> None:
    broken = []
    for target in _links(doc):
        if re.match(r"^[a-z]+:", target):  # http(s), mailto: outside, not checked offline
            continue
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists() or (anchor and path.suffix == ".md" and anchor not in _anchors(path)):
            broken.append(target)
    assert not broken, f"{doc.name}: {broken}"


def test_every_page_of_the_app_has_its_picture_in_the_readme() -> None:
    from scripts.screenshots import SHOTS

    app = (ROOT / "app" / "streamlit_app.py").read_text(encoding="utf-8")
    pages = {"home"} | set(re.findall(r'url_path="([a-z_-]+)"', app))  # Home is the default page, at "/"
    assert len(pages) == app.count("st.Page(") >= 12, "a page without a url_path, or one this test cannot read"
    assert pages <= {name for name, *_ in SHOTS}, pages - {name for name, *_ in SHOTS}
    readme = {Path(t).stem for t in _links(README) if t.startswith("docs/images/")}
    assert pages <= readme, f"pages without a picture in the README: {pages - readme}"
    assert any(q == "present=1" for _, _, q, _ in SHOTS) and "present-attention" in readme


def test_pictures_are_small_pngs() -> None:
    images = sorted((ROOT / "docs" / "images").glob("*"))
    assert len(images) >= 13
    for image in images:
        data = image.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", image.name
        assert len(data) <= 200 * 1024, f"{image.name} is {len(data) / 1024:.0f} KB"


def test_the_first_screen_says_how_to_start_and_shows_the_app() -> None:
    text = README.read_text(encoding="utf-8")
    body = text.split("---", 2)[2]  # after the Hugging Face header, which stays first
    assert text.startswith("---\ntitle: BERT Family Explorer")
    first = "\n".join(body.strip().splitlines()[:40])
    assert START in first and TEST in first
    assert re.search(r"!\[[^\]]+\]\(docs/images/[\w-]+\.png\)", first)


def test_the_readme_has_exactly_two_setup_commands() -> None:
    blocks = re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) == 2 and START in blocks[0] and TEST in blocks[1]
