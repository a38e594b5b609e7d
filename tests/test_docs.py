"""The README is a 3-minute read that links to docs/ for the rest; no link leads nowhere."""

import re

from helpers import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)|<img src=\"([^\"]+)\"")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors_of(page) -> set:
    return {anchor(line.lstrip("#")) for line in page.read_text().splitlines() if line.startswith("#")}


def test_every_relative_link_and_image_exists():
    for page in PAGES:
        for match in LINK.finditer(page.read_text()):
            target = match.group(1) or match.group(2)
            if re.match(r"[a-z]+://", target):
                continue
            path, _, fragment = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            assert resolved.exists(), f"{page.name}: {target}"
            if fragment:
                assert fragment in anchors_of(resolved), f"{page.name}: {target}: no such heading"


def test_the_readme_is_short_and_links_every_page_of_docs():
    readme = (REPO / "README.md").read_text()
    assert len(readme) < 6000, len(readme)
    for page in PAGES[1:]:
        assert f"(docs/{page.name}" in readme, page.name
    for row in readme.split("## Results", 1)[1].split("\n## ", 1)[0].splitlines():
        if row.startswith("| ") and not row.startswith("| run |"):
            assert len(row) < 250 and "](results/" in row or "](tests/" in row, row  # one short line, with its evidence


def test_the_pictures_are_small():
    for image in ("docs/images/breakout-agent.gif", "docs/images/pong-84-agent.gif", "results/breakout-a3c-k4-lr4e-4/learning_curve.png", "results/breakout-a3c-centred-linear-k4/learning_curve.png", "results/breakout-a3c-k4-lr4e-4/breakout-agent.gif"):
        assert (REPO / image).stat().st_size < 1_000_000, image
