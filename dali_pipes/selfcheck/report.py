"""The self-check's results: one line per check, a Markdown report and a JSON file.

Both files are what a bug report needs attached; they are written atomically (a
temporary file renamed into place), so an interrupted run leaves the previous report
whole or none at all.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from dali_pipes.data.files import write_text

Status = Literal["ok", "FAIL", "not run"]


@dataclass(frozen=True)
class Result:
    """One check: ``status``, what was measured against what bound (or why it did not
    run) in ``detail``, and the figures for the JSON file."""

    name: str
    status: Status
    detail: str
    figures: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def line(self) -> str:
        """The check's line on the terminal: status, name, detail."""
        return f"{self.status:<7} {self.name}: {self.detail}"


@dataclass(frozen=True)
class Report:
    """Everything one self-check found: the machine, each check, and whether the GPU half
    ran."""

    environment: dict[str, Any]
    results: tuple[Result, ...]
    gpu: bool
    quick: bool

    @property
    def passed(self) -> bool:
        """Every check that ran passed."""
        return all(result.status != "FAIL" for result in self.results)

    def counts(self) -> dict[str, int]:
        """How many checks passed, failed and did not run."""
        counts = {"ok": 0, "FAIL": 0, "not run": 0}
        for result in self.results:
            counts[result.status] += 1
        return counts

    def summary(self) -> str:
        """The verdict in one line, saying whether the GPU half ran."""
        counts = self.counts()
        verdict = "PASSED" if self.passed else "FAILED"
        half = (
            "the GPU half ran"
            if self.gpu
            else "the GPU half did NOT run: no CUDA GPU is visible to torch and DALI"
        )
        return (
            f"selfcheck {verdict}: {counts['ok']} ok, {counts['FAIL']} failed, "
            f"{counts['not run']} not run; {half}"
        )

    def as_dict(self) -> dict[str, Any]:
        """Everything, as the JSON report holds it."""
        return {
            "passed": self.passed,
            "gpu_half_ran": self.gpu,
            "quick": self.quick,
            "counts": self.counts(),
            "environment": self.environment,
            "checks": [asdict(result) for result in self.results],
        }

    def markdown(self) -> str:
        """The Markdown report: the verdict, the machine, one row per check."""
        lines = ["# dali_pipes selfcheck", "", f"**{self.summary()}**", "", "## Machine", ""]
        lines += ["| | |", "| --- | --- |"]
        lines += [f"| {key} | {_cell(value)} |" for key, value in _flat(self.environment)]
        lines += ["", "## Checks", "", "| status | check | measured (bound) | s |"]
        lines += ["| --- | --- | --- | --- |"]
        lines += [
            f"| {r.status} | {r.name} | {_cell(r.detail)} | {r.seconds:.1f} |" for r in self.results
        ]
        lines += [
            "",
            "Attach this file and selfcheck.json to a bug report "
            "(python -m dali_pipes.selfcheck --help).",
        ]
        return "\n".join(lines) + "\n"

    def write(self, out: Path) -> tuple[Path, Path]:
        """Write ``selfcheck.md`` and ``selfcheck.json`` to ``out``, each whole or not at all."""
        hint = "choose another folder with --out"
        md, js = out / "selfcheck.md", out / "selfcheck.json"
        write_text(md, self.markdown(), hint=hint)
        write_text(js, json.dumps(self.as_dict(), indent=2, default=str) + "\n", hint=hint)
        return md, js


def _flat(data: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in data.items():
        if isinstance(value, dict):
            rows += _flat(value, f"{prefix}{key}.")
        else:
            rows.append((f"{prefix}{key}", value))
    return rows


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")
