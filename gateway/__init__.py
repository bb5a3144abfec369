"""The Talon gateway daemon's core."""

from importlib.metadata import PackageNotFoundError, version

__all__ = ["talon_version"]


def talon_version() -> str:
    """The installed Talon's version, or ``unknown`` when run from a bare checkout."""
    try:
        return version("talon-gateway")
    except PackageNotFoundError:
        return "unknown"
