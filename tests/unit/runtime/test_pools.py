import os

import pytest

from dali_pipes.runtime.pools import fresh_pool


def _read(name: str) -> str | None:
    return os.environ.get(name)


def test_a_pool_started_after_the_server_sees_the_environment_of_its_caller_now(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = "DALI_PIPES_TEST_POOL_VARIABLE"
    monkeypatch.delenv(name, raising=False)
    with fresh_pool(1, [__name__]) as pool:  # starts the server without the variable
        assert pool.apply(_read, (name,)) is None
    monkeypatch.setenv(name, "set after the server started")
    with fresh_pool(1, [__name__]) as pool:
        assert pool.apply(_read, (name,)) == "set after the server started"
    monkeypatch.delenv(name)
    with fresh_pool(1, [__name__]) as pool:
        assert pool.apply(_read, (name,)) is None
