"""The documentation holds together: docs/README.md indexes every page of docs/, and every
relative link of docs/, README.md, CHANGELOG.md and bench/NOTES.md reaches a file that exists
and, for a page, a heading that exists (GitHub's anchors: lower case, punctuation dropped,
spaces to hyphens, repeats numbered)."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"```.*?```", flags=re.S)


def pages() -> list[Path]:
    extra = [REPO / "README.md", REPO / "CHANGELOG.md", REPO / "bench" / "NOTES.md"]
    return sorted(DOCS.rglob("*.md")) + [p for p in extra if p.exists()]


def prose(page: Path) -> str:
    """The page without its code blocks (a `](` in a shell line is no link)."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), page.read_text())


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", prose(page), flags=re.M):
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_every_relative_link_reaches_its_file_and_heading():
    broken = []
    for page in pages():
        for n, line in enumerate(prose(page).splitlines(), 1):
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                dest = (page.parent / path).resolve() if path else page
                where = f"{page.relative_to(REPO)}:{n}: {target}"
                if not dest.exists():
                    broken.append(f"{where} (no such file)")
                elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    broken.append(f"{where} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_index_names_every_page():
    index = DOCS / "README.md"
    linked = {(DOCS / t.partition("#")[0]).resolve() for t in LINK.findall(prose(index))}
    missing = [str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")
               if p != index and p.resolve() not in linked]
    assert not missing, f"docs/README.md does not list: {missing}"
