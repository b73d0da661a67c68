"""Every code block of the site runs as a reader would run it, and every output or picture
a page shows is one the project still produces (scripts/docs_blocks.py says how blocks are
read, run and compared; ``python scripts/docs_outputs.py`` writes the shown outputs again).

A page runs top to bottom in a fresh folder of its own, its blocks in order; a block that
needs what a test machine lacks says so in its title and is reported here, not run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from docs_blocks import (
    DOCS,
    NOT_RUN,
    BlockFailed,
    blocks,
    differences,
    form,
    pages,
    pictures,
    run_page,
    shown,
)
from helpers.png import check_png

RUNNABLE = [page for page in pages() if any(b.runs for b in blocks(page))]


def page_id(page: Path) -> str:
    return str(page.relative_to(DOCS))


def test_the_site_has_pages_whose_blocks_run_and_the_tutorial_is_one() -> None:
    names = {page_id(p) for p in RUNNABLE}
    assert "tutorial.md" in names and len(names) >= 10, sorted(names)


@pytest.mark.parametrize("page", pages(), ids=page_id)
def test_a_block_not_run_says_what_it_needs_and_each_shown_output_has_its_block_and_file(
    page: Path,
) -> None:
    for block in blocks(page):
        if block.skipped:
            assert re.fullmatch(rf"needs [^\"]+: {NOT_RUN}", str(block.title)), block.where
    for _, output in shown(page):  # raises when an output has no block before it
        assert (DOCS / str(output.shows)).is_file(), f"{output.where}: no {output.shows}"
    for image, origin in pictures(page):
        assert image.is_file(), f"{page_id(page)}: {image} (written from {origin}) is missing"


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=page_id)
def test_every_block_of_the_page_runs_and_prints_what_the_page_shows(
    page: Path, tmp_path: Path
) -> None:
    try:
        ran = {r.block.line: r for r in run_page(page, tmp_path)}
    except BlockFailed as exc:
        pytest.fail(str(exc), pytrace=False)
    for runner, output in shown(page):
        diff = differences((DOCS / str(output.shows)).read_text(), ran[runner.line].output)
        assert not diff, (
            f"{output.where}: the output of {runner.where} no longer has the shown form; "
            f"if the change is meant, run: python scripts/docs_outputs.py docs/{page_id(page)}\n"
            + "\n".join(diff)
        )
    for image, origin in pictures(page):
        if image.suffix == ".png":
            check_png(tmp_path / origin)
        else:
            assert (tmp_path / origin).is_file(), f"{page_id(page)}: no {origin}"


PAGE = """# A page

```python
print("one")
```

```text title="Output"
--8<-- "outputs/a-one.txt"
```

```python title="needs a GPU: not run by the tests"
import cupy
```

```python title="mod/helper.py"
VALUE = 3
```

1. A step in a list:

    ```bash
    python -c "from mod.helper import VALUE; print(VALUE)"
    ```

```diff
-before
+after
```

![a picture](img/x.png){ data-from="out/x.png" }
"""


def test_blocks_are_read_as_runs_files_skips_and_outputs_indented_ones_too(tmp_path: Path) -> None:
    page = tmp_path / "a.md"
    page.write_text(PAGE)
    found = blocks(page)
    assert [(b.lang, b.runs, b.skipped, b.file, b.shows) for b in found] == [
        ("python", True, False, None, None),
        ("text", False, False, None, "outputs/a-one.txt"),
        ("python", False, True, None, None),
        ("python", False, False, "mod/helper.py", None),
        ("bash", True, False, None, None),
        ("diff", False, False, None, None),
    ]
    assert found[4].code == 'python -c "from mod.helper import VALUE; print(VALUE)"\n'
    [(runner, output)] = shown(page)
    assert runner == found[0] and output == found[1]
    assert pictures(page) == [(tmp_path / "img" / "x.png", "out/x.png")]


def test_a_page_runs_in_order_in_its_folder_with_files_written_and_a_failure_named(
    tmp_path: Path,
) -> None:
    page = tmp_path / "a.md"
    page.write_text(PAGE)
    work = tmp_path / "work"
    work.mkdir()
    ran = run_page(page, work)
    assert [r.output for r in ran] == ["one\n", "3\n"]
    page.write_text(PAGE + "\n```bash\necho partial; exit 3\n```\n")
    with pytest.raises(BlockFailed, match=r"a\.md:\d+: exit code 3 from\n.*partial"):
        run_page(page, work)


def test_forms_ignore_numbers_paths_times_and_commits_but_not_words() -> None:
    shown_text = (
        "[07:33:49] epoch 2 | val_top1 0.5167 | 393 img/s\n"
        "dali_pipes 0.1.0 (commit 0b9f6a9)\n"
        "report: /tmp/abc/outputs/selfcheck.md\n"
        "| dali-cpu |   2835 | 1.83 |\n"
    )
    again = (
        "[08:01:02] epoch 2 | val_top1 0.9 | 41 img/s\n"
        "dali_pipes 0.1.0 (commit 1a2b3c4d+dirty)\n"
        "report: /home/u/run/outputs/selfcheck.md\n"
        "| dali-cpu | 12 | 0.50 |\n"
    )
    assert differences(shown_text, again) == []
    assert differences(shown_text, again.replace("val_top1", "top1"))
    assert differences(shown_text, again + "one more line\n")
    assert form("outputs/bench/bench.json 1/4 img/s") == ["outputs/bench/bench.json <n>/<n> img/s"]
    assert form("| synthetic | 2137582 |") == form("| synthetic | 541312 |")  # not a commit


def test_a_verdict_that_depends_on_the_measurement_keeps_its_kind_and_drops_its_advice() -> None:
    fed = "training is not waiting for data (119% of the synthetic-data rate): ...\n"
    waits = (
        "training waits for data 40% of the time and runs at 60% ...; try, in this order:\n"
        "  - a GPU: ...\n"
        "  (docs: How-to guides > Is training waiting for data?)\n"
    )
    assert form(fed) == form(waits) == ["<doctor verdict>"]
    # doctor tries a knob's values until one stops gaining: how many it logs varies
    two = "[10:39:06]   num_threads=4: 306 img/s, data wait 7%\nsettings written\n"
    one = "settings written\n"
    assert differences(two, one) == []
    assert (
        differences("fastest here: dali-cpu, 1.8x\n", "the DataLoader baseline is faster here\n")
        == []
    )
