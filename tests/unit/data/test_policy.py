"""data.on_error in one place (dali_pipes/data/policy.py): raise, skip with a substitute,
drop; the record of bad samples."""

from __future__ import annotations

import pytest

from dali_pipes.data.policy import BadFiles, OnError
from dali_pipes.data.substitutes import Filled, Slot, substitute
from dali_pipes.errors import DataError


def failing(name: str) -> int:
    raise DataError(f"{name}: not an image")


def test_raise_stops_at_the_first_bad_sample_with_its_one_line() -> None:
    reported: list[str] = []
    policy = OnError("raise")
    assert policy.attempt("a.jpg", lambda: 7, lambda n, e: reported.append(n)) == 7
    with pytest.raises(DataError, match=r"^b\.jpg: not an image$"):
        policy.attempt("b.jpg", lambda: failing("b.jpg"), lambda n, e: reported.append(n))
    assert reported == [] and not policy.tolerates and not policy.substitutes


@pytest.mark.parametrize("mode", ["skip", "drop"])
def test_skip_and_drop_report_a_bad_sample_and_carry_on(mode: str) -> None:
    reported: list[tuple[str, str]] = []
    policy = OnError(mode)
    got = policy.attempt(
        "b.jpg", lambda: failing("b.jpg"), lambda n, e: reported.append((n, str(e)))
    )
    assert got is None and reported == [("b.jpg", "b.jpg: not an image")]
    assert policy.tolerates and policy.substitutes == (mode == "skip")


def test_a_bad_slot_gets_the_first_good_substitute_drawn_for_it_under_skip_only() -> None:
    bad = {3, substitute(9, 2, 5, 0, 10)}
    retry = lambda i: None if i in bad else f"image {i}"  # noqa: E731
    expected = next(s for a in range(64) if (s := substitute(9, 2, 5, a, 10)) not in bad)
    skip, drop = OnError("skip", seed=9), OnError("drop", seed=9)
    slot = Slot(epoch=2, position=5, num_items=10)
    assert skip.fill(4, "image 4", slot, retry, str) == Filled(4, "image 4")
    assert skip.fill(3, None, slot, retry, str) == Filled(expected, f"image {expected}")
    assert drop.fill(3, None, slot, retry, str) is None


def test_a_split_of_bad_samples_ends_in_one_line_not_a_loop() -> None:
    with pytest.raises(DataError, match=r"^data\.on_error=skip: 64 substitutes in a row"):
        OnError("skip").fill(0, None, Slot(0, 0, 4), lambda i: None, lambda i: f"s{i}.jpg")


def test_bad_files_are_reported_once_and_counted_per_epoch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bad = BadFiles()
    bad.add("a.jpg", DataError("a.jpg: truncated"))
    bad.add("a.jpg", "a.jpg: truncated")
    bad.add("b.jpg", "listed out", count=False)
    assert bad.reasons == {"a.jpg": "truncated", "b.jpg": "listed out"}
    assert bad.this_epoch == 1 and "a.jpg" in bad
    assert [r.getMessage() for r in caplog.records].count("skipping a.jpg: truncated") == 1
