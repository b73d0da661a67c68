"""How a documentation page reads: its prose sentences, their lengths, its words, and the
lab-notebook references a user's page must not carry.

    python scripts/docs_prose.py            # every page and the README, one line each
    python scripts/docs_prose.py docs/tutorial.md --long   # and the long sentences

Prose is what is left of a Markdown page without its fenced code, tables, headings,
images, HTML and snippet lines; inline code counts as one word. A sentence ends at
``.``, ``!`` or ``?`` before a space (not after an abbreviation such as "e.g."), or at the
end of a paragraph or list item. The limits (:data:`LONG`, :data:`MOST_LONG`,
:data:`MOST_WORDS`) are the ones the documentation keeps; ``tests/docs/test_prose.py``
holds every page to them.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from docs_blocks import DOCS, REPO, pages

#: A sentence of more words than this is long ...
LONG = 35
#: ... and at most this share of a page's sentences may be.
MOST_LONG = 0.10
#: Words a page may have outside its code blocks (prose, tables and headings).
MOST_WORDS = 2000
#: Pages written from docstrings or included whole from benchmarks/RESULTS.md: no word limit.
GENERATED = ("reference/api.md", "results-log.md")
#: Pages for contributors and for measurements, where commits, issue numbers and test
#: paths belong.
RECORDS = ("development.md", "results.md", "results-log.md")

_FENCE = re.compile(r"^\s*(```+|~~~+)")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_SKIP_LINE = re.compile(r"^\s*(#|\||<|!\[|-+8<|;?-+8<|:::|!!!|\?\?\?|\*\*\*|---\s*$|\[\^)")
_ABBREVIATIONS = re.compile(r"\b(e\.g|i\.e|etc|vs|cf|approx|no|Fig)\.", re.I)
_SPLIT = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=\S)")
_WORD = re.compile(r"\w")

#: The project's own words for its internals, which a user never learnt: a page may quote
#: them ("...", or in bold, as a command prints them) to explain them, not use them.
JARGON = (
    "batch contract",
    "CPU twin",
    "decode ceiling",
    "framework tax",
    "mended sample",
    "host side",
    "host-side",
    "corner file",
    "yardstick",
    "candidates",
    "placement",
)
#: The page that defines the few terms a user must learn, quoting them as it goes.
GLOSSARY = "explanation/glossary.md"
_QUOTED = re.compile(r"\*\*[^*]+\*\*|\"[^\"]*\"|“[^”]*”|`[^`]*`")

_COMMIT = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
_ISSUE = re.compile(r"\bissues?\s+#?\d+|(?<![\w&/])#\d{1,5}\b", re.I)
_TEST_PATH = re.compile(r"\btests/[\w./-]*\w")


def _inline(text: str) -> str:
    """A prose line as words: code spans as one word, links as their text, markup gone."""
    text = re.sub(r"`[^`]*`", "CODE", text)
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("**", "").replace("__", "")


def units(markdown: str, keep_marks: bool = False) -> list[str]:
    """The page's prose as paragraphs and list items, each one string (with
    ``keep_marks``, code spans and bold kept as written)."""
    found: list[str] = []
    current: list[str] = []
    fenced = False

    def close() -> None:
        if current:
            found.append(" ".join(current))
            current.clear()

    for line in markdown.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            close()
            continue
        if fenced:
            continue
        if not line.strip() or _SKIP_LINE.match(line):
            close()
            continue
        if _ITEM.match(line):
            close()
            line = _ITEM.sub("", line, count=1)
        current.append(line.strip() if keep_marks else _inline(line.strip()))
    close()
    return found


def sentences(markdown: str) -> list[str]:
    """Every prose sentence of the page."""
    out = []
    for unit in units(markdown):
        protected = _ABBREVIATIONS.sub(lambda m: m.group(0).replace(".", "\0"), unit)
        for sentence in _SPLIT.split(protected):
            sentence = sentence.replace("\0", ".").strip()
            if _WORD.search(sentence):
                out.append(sentence)
    return out


def word_count(text: str) -> int:
    """Words with a letter or digit in them."""
    return sum(1 for token in text.split() if _WORD.search(token))


def page_words(markdown: str) -> int:
    """The page's words outside fenced code: prose, tables and headings."""
    kept = []
    fenced = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            kept.append(_inline(line).replace("|", " "))
    return word_count("\n".join(kept))


@dataclass(frozen=True)
class Reading:
    """How one page reads."""

    name: str
    sentences: int
    long: tuple[str, ...]
    words: int
    references: tuple[str, ...]

    @property
    def long_share(self) -> float:
        return len(self.long) / self.sentences if self.sentences else 0.0

    def problems(self) -> list[str]:
        """What breaks the limits, one line each."""
        found = []
        if self.long_share > MOST_LONG:
            found.append(
                f"{self.name}: {len(self.long)} of {self.sentences} sentences are over {LONG} "
                f"words ({100 * self.long_share:.0f}%, at most {100 * MOST_LONG:.0f}%)"
            )
        if self.name not in GENERATED and self.words > MOST_WORDS:
            found.append(f"{self.name}: {self.words} words (at most {MOST_WORDS}); split it")
        found += [f"{self.name}: {ref}" for ref in self.references]
        return found


def references(markdown: str) -> list[str]:
    """Commit hashes, issue numbers and test paths in the page, each named."""
    found = []
    for kind, pattern in (("commit", _COMMIT), ("issue", _ISSUE), ("test path", _TEST_PATH)):
        found += [f"{kind} {m.group(0)!r}" for m in pattern.finditer(markdown)]
    return found


def jargon(markdown: str) -> list[str]:
    """The project's internal words used (not quoted) in the page's prose, each named."""
    found = []
    for unit in units(markdown, keep_marks=True):
        free = _QUOTED.sub(" ", unit)
        found += [f"internal word {w!r}" for w in JARGON if re.search(rf"\b{w}", free, re.I)]
    return found


def name_of(page: Path) -> str:
    return str(page.relative_to(DOCS)) if page.is_relative_to(DOCS) else page.name


def read(page: Path) -> Reading:
    """How ``page`` reads (a page of ``docs/``, or the README)."""
    text = page.read_text()
    name = name_of(page)
    found = sentences(text)
    long = tuple(s for s in found if word_count(s) > LONG)
    refs = () if name in RECORDS else tuple(references(text))
    if name not in (*RECORDS, GLOSSARY):
        refs += tuple(jargon(text))
    return Reading(name, len(found), long, page_words(text), refs)


def every_page() -> list[Path]:
    """The site's pages and the README."""
    return [*pages(), REPO / "README.md"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", type=Path)
    parser.add_argument("--long", action="store_true", help="print the long sentences")
    args = parser.parse_args(argv)
    bad = 0
    for page in [p.resolve() for p in args.pages] or every_page():
        r = read(page)
        print(
            f"{r.name:<40} {r.words:>5} words {r.sentences:>4} sentences "
            f"{100 * r.long_share:>4.0f}% long"
        )
        if args.long:
            for sentence in r.long:
                print(f"    ({word_count(sentence)}) {sentence}")
        for problem in r.problems():
            print(f"  {problem}")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
