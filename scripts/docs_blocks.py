"""The documentation's code blocks: found, run in order, and their shown outputs compared.

A page of ``docs/`` is a script a reader follows top to bottom, so its blocks run that way:
in one fresh working folder per page, in page order. What a fenced block is follows from
its info string:

- ``python`` / ``bash`` (``sh``): run (Python with this interpreter, shell with ``bash -e``
  and this interpreter's folder first on ``PATH``, so ``python`` is the project's);
- any language with ``title="needs X: not run by the tests"``: not run (a GPU, ImageNet,
  a bucket; the title says what, where the reader sees it);
- any language with a file name for title (``title="my_loop.py"``): written to that file
  in the working folder, for later blocks to run;
- ``text`` whose only line includes a file of ``docs/outputs/`` (``--8<-- "outputs/x.txt"``):
  the output of the nearest block before it that runs, shown to the reader;
- anything else (``diff``, ``yaml`` without a title, ...): shown only.

In the tests (``warm=True``), a page's ``python -m dali_pipes.<command>`` lines run in
processes forked from one interpreter that imported the project once (one per test process,
shared by the pages it runs)
(:mod:`warm_python`): the same command, arguments, folder and environment, without the
seconds of imports each one would repeat. ``DALI_PIPES_DOCS_COLD=1`` runs every command
in a new interpreter, as ``scripts/docs_outputs.py`` always does.

An image with ``data-from="<path>"`` (``![...](../img/x.png){ data-from="outputs/show/show.png" }``)
is a picture a block wrote at that path of the working folder.

Outputs are compared by their form (:func:`form`): the same lines with numbers, paths,
times and commits taken out, so a measurement that moves passes and a reworded or missing
line fails. A few lines say one of two things depending on what was measured (bench's and
doctor's verdicts); :data:`VERDICTS` names them, and their form is the verdict's kind.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
NOT_RUN = "not run by the tests"
RUN = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash"}

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>```+|~~~+)(?P<info>[^\n]*)$")
TITLE = re.compile(r'title="(?P<title>[^"]*)"')
SNIPPET = re.compile(r'^\s*-{1,}8<-{1,}\s+"(?P<path>[^":]+)(?::(?P<lines>[\d:-]+))?"\s*$')
FILE_TITLE = re.compile(r"[\w./-]+\.\w+")
PICTURE = re.compile(
    r"!\[[^\]]*\]\((?P<src>[^)\s]+)\)\{[^}]*data-from=\"(?P<origin>[^\"]+)\"[^}]*\}"
)


@dataclass(frozen=True)
class Block:
    """One fenced block of a page: where it starts, its language and title, its text."""

    page: Path
    line: int
    lang: str
    title: str | None
    code: str

    @property
    def where(self) -> str:
        page = self.page.relative_to(DOCS) if self.page.is_relative_to(DOCS) else self.page
        return f"{page}:{self.line}"

    @property
    def skipped(self) -> bool:
        """Marked as needing what a test machine lacks."""
        return self.title is not None and self.title.endswith(NOT_RUN)

    @property
    def file(self) -> str | None:
        """The file this block is written to, when its title is a file name."""
        if self.title and not self.skipped and FILE_TITLE.fullmatch(self.title):
            return self.title
        return None

    @property
    def runs(self) -> bool:
        return self.lang in RUN and not self.skipped and self.file is None

    @property
    def shows(self) -> str | None:
        """The file of ``docs/`` this block shows, when it is a shown output."""
        lines = [line for line in self.code.splitlines() if line.strip()]
        if self.lang == "text" and len(lines) == 1:
            match = SNIPPET.match(lines[0])
            if match:
                return match["path"]
        return None


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page`` in order, indented ones (in lists, admonitions)
    dedented."""
    found = []
    lines = page.read_text().splitlines()
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, info = match["indent"], match["fence"], match["info"].strip()
        body = []
        j = i + 1
        while j < len(lines) and not (
            lines[j].strip().startswith(fence) and lines[j].strip().strip(fence[0]) == ""
        ):
            line = lines[j]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            j += 1
        lang = info.split()[0].lower() if info else ""
        title = TITLE.search(info)
        code = "\n".join(body) + "\n"
        found.append(Block(page, i + 1, lang, title["title"] if title else None, code))
        i = j + 1
    return found


def pages(folder: Path = DOCS) -> list[Path]:
    """Every Markdown page of the site, in a stable order."""
    return sorted(folder.rglob("*.md"))


def shown(page: Path) -> list[tuple[Block, Block]]:
    """Each shown output of ``page`` with the block whose output it is."""
    return pairs(blocks(page))


def pairs(found: list[Block]) -> list[tuple[Block, Block]]:
    """Each shown output among a page's blocks with the block whose output it is."""
    pairs = []
    last: Block | None = None
    for block in found:
        if block.shows:
            if last is None:
                raise ValueError(f"{block.where}: a shown output with no block before it to run")
            pairs.append((last, block))
        elif block.runs:
            last = block
    return pairs


def pictures(page: Path) -> list[tuple[Path, str]]:
    """Each picture a block of ``page`` writes: the image file in ``docs/`` and where the
    block writes it, relative to the working folder."""
    text = page.read_text()
    return [((page.parent / m["src"]).resolve(), m["origin"]) for m in PICTURE.finditer(text)]


class BlockFailed(AssertionError):
    """A block that ran and exited with an error, with the end of what it printed."""


@dataclass(frozen=True)
class Ran:
    """A block that ran: what it printed (stdout and stderr as one stream) and how long."""

    block: Block
    output: str
    seconds: float


def environment(folder: Path | None = None) -> dict[str, str]:
    """The reader's shell: this interpreter's folder first on PATH, unbuffered output (so
    stdout and stderr interleave as on a terminal), no colour, no progress bars; with
    ``folder``, the Hugging Face cache in it and no request to the Hub (a page writes nothing
    outside its folder)."""
    env = dict(os.environ)
    if folder is not None:
        env["HF_HOME"] = str(folder / ".cache" / "huggingface")
        env["HF_HUB_OFFLINE"] = "1"
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env["NO_COLOR"] = "1"
    env["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def run_page(page: Path, folder: Path, timeout: float = 600, warm: bool = True) -> list[Ran]:
    """Run ``page``'s blocks in order in ``folder`` (written files written, shown-only
    blocks left); the first that fails raises :class:`BlockFailed` naming it. ``warm``:
    its ``python -m dali_pipes.<command>`` lines from a warm interpreter (see above)."""
    return run_blocks(blocks(page), folder, timeout, warm)


def run_blocks(
    found: list[Block], folder: Path, timeout: float = 600, warm: bool = False
) -> list[Ran]:
    """Run a page's blocks (:func:`run_page`), read once by the caller."""
    env = environment(folder)
    if not warm or os.environ.get("DALI_PIPES_DOCS_COLD") == "1" or not _any_command(found):
        return _run_in(found, folder, timeout, env)
    from warm_python import this_process  # shared by the pages (and tests) of this process

    env["PATH"] = f"{this_process().bin}{os.pathsep}{env['PATH']}"
    return _run_in(found, folder, timeout, env)


def _any_command(found: list[Block]) -> bool:
    """Whether a block runs Python (then a warm interpreter saves its imports)."""
    return any(
        b.runs and (RUN[b.lang] == "python" or "python " in b.code or "torchrun " in b.code)
        for b in found
    )


def _run_in(found: list[Block], folder: Path, timeout: float, env: dict[str, str]) -> list[Ran]:
    import time

    ran = []
    for block in found:
        if block.file:
            target = folder / block.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(block.code)
            continue
        if not block.runs:
            continue
        if RUN[block.lang] == "python":  # the PATH's python: warm, when a page has one
            command = ["python", "-c", block.code]
        else:
            command = ["bash", "-e", "-o", "pipefail", "-c", block.code]
        start = time.monotonic()
        try:
            done = subprocess.run(
                command,
                cwd=folder,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired as exc:
            raise BlockFailed(f"{block.where}: still running after {timeout:.0f} s") from exc
        if done.returncode != 0:
            raise BlockFailed(
                f"{block.where}: exit code {done.returncode} from\n{block.code}\n"
                f"--- its output, last 3000 characters ---\n{done.stdout[-3000:]}"
            )
        ran.append(Ran(block, done.stdout, time.monotonic() - start))
    return ran


#: Lines that say one of a few things depending on what was measured, by kind: their
#: form is the kind. (bench: which loader was fastest; doctor: whether training waits
#: for data, and the placement it recommends.) Lines of advice that follow a verdict
#: ("  - ...") come and go with it, and so do doctor's tuning trials (it stops trying a
#: knob when it stops gaining), so they are left out of the form.
VERDICTS = {
    "bench verdict": re.compile(r"^(fastest here: |the DataLoader baseline is faster here)"),
    "doctor verdict": re.compile(
        r"^(training (is not waiting|waits) for data|the measurement is too noisy to tell)"
    ),
    "doctor placement": re.compile(r"^ *use .*: the fastest"),
    "doctor tuned": re.compile(r"^ *tuned +: "),
}
ADVICE = re.compile(r"^ {2}(- |\()|^(\[[\d:]+\])? +\w+=\S+: [\d.]+ img/s, data wait")
#: What a launcher logs about the environment it found (torchrun's warning that it set
#: OMP_NUM_THREADS, in glog's "W1128 08:01:02.123 ..." form): the reader's shell, not the
#: command, decides whether it appears.
LAUNCHER = re.compile(r"^[IWE]\d{4} \d\d:\d\d:\d\d")

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# A hash with a digit and a letter, or any hash after "commit " (one of digits alone is
# a number elsewhere, but 8385383 is a commit there).
_COMMIT = re.compile(
    r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}(\+dirty)?\b"
    r"|(?<=commit )[0-9a-f]{7,40}(\+dirty)?\b"
)
_PATH = re.compile(r"(?<![\w.~])(~|/)(/?[\w.+@-]+)+/?")
_NULL = re.compile(r": null$")
_NUMBER = re.compile(r"[-+]?\d+(?:[.,:]\d+)*(?:[eE][-+]?\d+)?")


def plain(text: str) -> str:
    """``text`` without terminal colour codes (DALI colours its log lines whatever
    ``NO_COLOR`` says): what a page shows."""
    return _ANSI.sub("", text)


def form(text: str) -> list[str]:
    """What must stay the same when a command runs again: its lines, with numbers,
    absolute paths, times and commits replaced by placeholders, runs of spaces made one,
    verdicts by their kind (:data:`VERDICTS`) and the advice that follows them left out."""
    lines = []
    for raw in plain(text).splitlines():
        kind = next((k for k, pattern in VERDICTS.items() if pattern.search(raw)), None)
        if kind:
            lines.append(f"<{kind}>")
            continue
        if ADVICE.match(raw) or LAUNCHER.match(raw):
            continue
        line = _COMMIT.sub("<commit>", raw)
        line = _PATH.sub("<path>", line)
        line = _NUMBER.sub("<n>", line)
        line = _NULL.sub(": <n>", line)  # a setting left to its default, or a number
        line = re.sub(r"\s+", " ", line).strip()
        if line:
            lines.append(line)
    return lines


def differences(shown_text: str, new_text: str) -> list[str]:
    """The lines whose form differs, as a unified diff of the forms ([] when the same)."""
    import difflib

    old, new = form(shown_text), form(new_text)
    if old == new:
        return []
    return list(difflib.unified_diff(old, new, "shown", "now", lineterm="", n=1))


def command_line(block: Block) -> str:
    """The block as one line, for messages."""
    return shlex.join(block.code.split())[:120]
