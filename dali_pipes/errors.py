"""The one exception family users see.

Every error a user can fix (a wrong path, a bad config value, a file that is not an image,
a device that is not there) is raised as a :class:`DaliPipesError` whose message is one
line naming the path or value and what to do. Entry points print that line instead of a
stack trace; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

from typing import Any


class DaliPipesError(Exception):
    """Base class: a problem the user can act on, described in one line."""


class ConfigError(DaliPipesError, ValueError):
    """A configuration value is missing, of the wrong type or out of range."""


class DataError(DaliPipesError):
    """A dataset path or file cannot be used (missing, empty, not an image, ...)."""


class NameTaken(ConfigError):
    """A name is registered already (an op, a data source, a backend, ...): registering
    another thing under it is refused unless the registration says ``replace=True``."""


class DeviceError(DaliPipesError):
    """The requested device (for example a GPU) is not available on this machine."""


def require(ok: bool, key: str, value: Any, need: str) -> None:
    """Raise a one-line :class:`ConfigError` naming ``key=value`` unless ``ok``."""
    if not ok:
        raise ConfigError(f"{key}={value!r} is invalid: {need}")


def unreadable(path: str, exc: OSError, what: str = "the file") -> DataError:
    """The one-line error for a file the operating system would not let us read (or open):
    every image, shard and decode path words it the same way."""
    return DataError(
        f"{path}: cannot read {what} ({exc.strerror or exc}); check it exists and is readable"
    )
