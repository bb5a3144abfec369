"""One exception tree: every branch is a :class:`TalonError`, and no error is in two branches."""

from __future__ import annotations

import itertools

import pytest

from gateway.errors import ConfigError, PlatformError, RefusedError, TalonError, TransientError

BRANCHES = (ConfigError, RefusedError, TransientError, PlatformError)


@pytest.mark.parametrize("branch", BRANCHES, ids=lambda b: b.__name__)
def test_every_branch_is_a_talon_error(branch: type[TalonError]) -> None:
    assert issubclass(branch, TalonError)


def test_the_branches_do_not_overlap() -> None:
    for one, other in itertools.combinations(BRANCHES, 2):
        assert not issubclass(one, other) and not issubclass(other, one), (one, other)


def test_a_config_error_lists_its_problems_one_per_line() -> None:
    several = ConfigError(["channels[0].token: required", "bindings[0].persona: unknown"])
    single = ConfigError("cwd /nope is not a directory")

    assert several.problems == ["channels[0].token: required", "bindings[0].persona: unknown"]
    assert str(several) == "channels[0].token: required\nbindings[0].persona: unknown"
    assert single.problems == ["cwd /nope is not a directory"] and str(single) == single.problems[0]


def test_a_platform_error_is_permanent_unless_it_says_otherwise() -> None:
    assert PlatformError("token rejected").transient is False
