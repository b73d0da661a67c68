"""Every page of the site, and the README, reads as written for a user: short sentences,
a page a reader can finish, and no commits, issue numbers or test paths outside the pages
for contributors and measurements (scripts/docs_prose.py says how it is measured)."""

from __future__ import annotations

from pathlib import Path

import pytest
from docs_prose import (
    LONG,
    Reading,
    every_page,
    name_of,
    page_words,
    read,
    references,
    sentences,
    word_count,
)


@pytest.mark.parametrize("page", every_page(), ids=name_of)
def test_the_page_reads_in_short_sentences_within_its_length_and_without_lab_references(
    page: Path,
) -> None:
    reading = read(page)
    assert reading.sentences >= 3, f"{reading.name}: hardly any prose found"
    assert not reading.problems(), "\n".join(reading.problems() + list(reading.long))


PAGE = (
    """# A heading that is not counted even if it runs on for very many words in a row here

Short one. Another short one, e.g. this, with `inline code that is long` as one word.

```python
x = "code is not prose, however long the line in it may be, it is never counted here at all"
```

| a table | is not prose either, whatever its cells may say in words |
| --- | --- |

- A list item is a sentence of its own
- and so is this one.

"""
    + " ".join(["word"] * (LONG + 1))
    + ".\n"
)


def test_prose_leaves_out_code_tables_and_headings_and_splits_items_and_sentences() -> None:
    found = sentences(PAGE)
    assert found[:2] == ["Short one.", "Another short one, e.g. this, with CODE as one word."]
    assert found[2:4] == ["A list item is a sentence of its own", "and so is this one."]
    assert len(found) == 5 and word_count(found[4]) == LONG + 1


def test_a_page_with_too_many_long_sentences_or_words_is_named_with_its_figures() -> None:
    one_long = Reading("x.md", sentences=5, long=("...",), words=2001, references=())
    assert one_long.problems() == [
        "x.md: 1 of 5 sentences are over 35 words (20%, at most 10%)",
        "x.md: 2001 words (at most 2000); split it",
    ]
    assert Reading("x.md", 10, ("...",), 2000, ()).problems() == []
    assert Reading("reference/api.md", 10, (), 9999, ()).problems() == []


def test_page_words_count_tables_and_headings_but_not_code() -> None:
    assert page_words("# Two words\n\n| three words here |\n\n```\nnot these\n```\n") == 5


def test_commits_issue_numbers_and_test_paths_are_found() -> None:
    found = references("Fixed in 0b9f6a9 (issue 46, see #12) by tests/unit/test_x.py.")
    assert found == [
        "commit '0b9f6a9'",
        "issue 'issue 46'",
        "issue '#12'",
        "test path 'tests/unit/test_x.py'",
    ]
    assert references("a word like decade, anchors (#install), 1234567 and facade") == []


def test_internal_words_are_found_unless_quoted_as_a_command_prints_them() -> None:
    from docs_prose import jargon

    page = (
        "The batch contract holds.\n\n- **placement**: where batches are made.\n\n"
        'bench prints "% decode ceiling" and `CPU twin`.\n'
    )
    assert jargon(page) == ["internal word 'batch contract'"]


def test_the_contributor_and_results_pages_may_cite_commits(tmp_path: Path) -> None:
    from docs_prose import RECORDS

    assert "development.md" in RECORDS and "results.md" in RECORDS
