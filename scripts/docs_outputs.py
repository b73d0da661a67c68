"""Regenerate (or check) the outputs and pictures the documentation shows.

    python scripts/docs_outputs.py                      # every page that shows an output
    python scripts/docs_outputs.py docs/tutorial.md     # one page
    python scripts/docs_outputs.py --check docs/tutorial.md   # compare forms, write nothing

Each page runs top to bottom in a fresh folder (scripts/docs_blocks.py says how blocks
are read); the output of each block followed by a shown output is written to the file of
``docs/outputs/`` the page includes, and each picture with ``data-from`` is copied from the
folder into ``docs/``. With ``--check`` nothing is written: the forms are compared, as the
tests do, and the differences printed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from docs_blocks import (
    DOCS,
    BlockFailed,
    blocks,
    differences,
    pages,
    pairs,
    pictures,
    plain,
    run_blocks,
    shown,
)


def with_outputs(candidates: list[Path]) -> list[Path]:
    """The pages among ``candidates`` that show an output or a picture."""
    return [page for page in candidates if shown(page) or pictures(page)]


def regenerate(page: Path, check: bool) -> list[str]:
    """Run ``page`` and write (or, with ``check``, compare) what it shows; the problems."""
    problems = []
    with tempfile.TemporaryDirectory(prefix=f"docs-{page.stem}-") as tmp:
        folder = Path(tmp)
        found = blocks(page)  # read once: the page may be edited while it runs
        try:
            ran = {r.block.line: r for r in run_blocks(found, folder)}
        except BlockFailed as exc:
            return [str(exc)]
        for runner, output in pairs(found):
            target = DOCS / str(output.shows)
            text = ran[runner.line].output
            if check:
                old = target.read_text() if target.is_file() else ""
                diff = differences(old, text)
                if diff:
                    problems.append(f"{output.where}: {target.name} differs\n" + "\n".join(diff))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(plain(text))
                print(f"{output.where}: wrote {target.relative_to(DOCS.parent)}")
        for image, origin in pictures(page):
            made = folder / origin
            if not made.is_file():
                problems.append(f"{page.name}: no {origin} was written for {image.name}")
            elif not check:
                image.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(made, image)
                print(f"{page.name}: copied {origin} to {image.relative_to(DOCS.parent)}")
        for r in ran.values():
            print(f"  {r.block.where}: {r.seconds:.1f} s")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", type=Path, help="pages (default: all that show one)")
    parser.add_argument("--check", action="store_true", help="compare forms, write nothing")
    args = parser.parse_args(argv)
    chosen = [p.resolve() for p in args.pages] or with_outputs(pages())
    problems = []
    for page in chosen:
        print(f"{page.relative_to(DOCS.parent)}")
        problems += regenerate(page, args.check)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
