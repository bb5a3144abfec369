"""One exception tree: every exception Talon defines is a :class:`TalonError` in the branch
that says what to do about it, apart from a few named ones that only carry control flow
inside their module."""

from __future__ import annotations

import importlib
import inspect
import itertools
import pkgutil

import pytest

from connectors.base import ConnectorStartError
from connectors.discord_bot.sessions import TokenRejectedError
from connectors.slack.receiver import IntakeFailedError
from gateway.budgets import BudgetExceededError, ChildBudgetError
from gateway.chat_cli import ChatFailedError
from gateway.children.compose import ComposeError
from gateway.cli.common import CommandError
from gateway.control_client import DaemonNotRunningError
from gateway.data_dir import AlreadyRunningError
from gateway.delegation import DelegationError
from gateway.documents import DocumentError
from gateway.errors import ConfigError, PlatformError, RefusedError, TalonError, TransientError
from gateway.host_tools import SessionError
from gateway.http.console.auth import ConsoleRefusedError
from gateway.image_format import ImageFormatError
from gateway.intake import ShuttingDownError
from gateway.interactions.questions import QuestionError
from gateway.jsonsafe import JSONInputError
from gateway.memory_query import QueryError
from gateway.outbox_spool import FileTooLargeError
from gateway.persona_mcp.connection import ServerUnavailableError
from gateway.persona_mcp.sandbox import SandboxError
from gateway.poster import NotifyError
from gateway.queue import ReplyNotSavedError
from gateway.runtime.model import ProviderError
from gateway.runtime.providers.retry import RetryableError
from gateway.scheduling.cron import ScheduleError
from gateway.skills import SkillError
from gateway.store.copy import CopyError
from gateway.store.db import DatabaseUnreachableError, SchemaTooNewError, WriteConflictError
from gateway.store.delegation import TaskLimitError
from gateway.store.findings import FindingsFullError
from gateway.store.postgres import NodeLockedError
from gateway.store.queue import LeaseLostError
from gateway.store.readonly import ReadOnlyQueryError
from gateway.store.state import StateQuotaError
from gateway.subagents.base import SubagentError, SubagentRefusedError, SubagentUnavailableError
from gateway.subagents.files import WorkspaceError
from gateway.subagents.output import OutputError
from gateway.voice.ffmpeg import AudioToolError
from tools.base import ToolError
from tools.bridge import BridgeAuthError
from tools.bridge_client import BridgeRequestError, BridgeUnavailableError
from tools.mcp_server import SessionRefusedError

PACKAGES = ("gateway", "connectors", "tools")
BRANCHES = (ConfigError, RefusedError, TransientError, PlatformError)

BRANCH_OF: dict[type[TalonError], type[TalonError]] = {
    SandboxError: ConfigError,
    AlreadyRunningError: RefusedError,
    ConsoleRefusedError: RefusedError,
    FileTooLargeError: RefusedError,
    DocumentError: RefusedError,
    AudioToolError: RefusedError,
    BridgeAuthError: RefusedError,
    BridgeRequestError: RefusedError,
    BudgetExceededError: RefusedError,
    ChatFailedError: RefusedError,
    ChildBudgetError: RefusedError,
    CommandError: RefusedError,
    ComposeError: RefusedError,
    CopyError: RefusedError,
    DelegationError: RefusedError,
    FindingsFullError: RefusedError,
    ImageFormatError: RefusedError,
    JSONInputError: RefusedError,
    NodeLockedError: RefusedError,
    NotifyError: RefusedError,
    OutputError: RefusedError,
    QueryError: RefusedError,
    ReadOnlyQueryError: RefusedError,
    ScheduleError: RefusedError,
    SchemaTooNewError: RefusedError,
    SessionError: RefusedError,
    SessionRefusedError: RefusedError,
    SkillError: RefusedError,
    QuestionError: RefusedError,
    StateQuotaError: RefusedError,
    SubagentError: RefusedError,
    SubagentRefusedError: RefusedError,
    SubagentUnavailableError: RefusedError,
    TaskLimitError: RefusedError,
    LeaseLostError: RefusedError,
    WorkspaceError: RefusedError,
    ToolError: RefusedError,
    BridgeUnavailableError: TransientError,
    DaemonNotRunningError: TransientError,
    IntakeFailedError: TransientError,
    ReplyNotSavedError: TransientError,
    RetryableError: TransientError,
    ServerUnavailableError: TransientError,
    ShuttingDownError: TransientError,
    WriteConflictError: TransientError,
    DatabaseUnreachableError: TransientError,
    ConnectorStartError: PlatformError,
    TokenRejectedError: PlatformError,
    ProviderError: PlatformError,
}

# Raised and caught within their own module (or its caller one frame up); nothing else
# should catch them, so they stay out of the tree.
CONTROL_FLOW = {
    "connectors.render.frames.NeedRanges": "the builder asks parse() to build again with source ranges",
    "connectors.render.syntax.ParserFailure": "parse() shows the text as written instead",
    "connectors.slack.inbound.SkipEvent": "the event yields no InboundEvent; the connector drops it",
    "connectors.slack.files._Skipped": "one attachment is left out of the event",
    "tools.workspace.egress_proxy._Refused": "the shell's egress proxy answers the connection with it",
    "connectors.web.routes._Refused": "a web chat route answers the request with its status and message",
    "gateway.outbox._ClaimLost": "a cluster node's sender leaves a thread another node took over",
    "gateway.store.db._MemberRaised": "a group commit's member raised: each member runs again alone",
}


def _defined_exceptions() -> dict[str, type[BaseException]]:
    """Every exception class defined in the packages, by qualified name."""
    found: dict[str, type[BaseException]] = {}
    for top in PACKAGES:
        package = importlib.import_module(top)
        for info in pkgutil.walk_packages(package.__path__, f"{top}."):
            module = importlib.import_module(info.name)
            for name, value in vars(module).items():
                if (
                    inspect.isclass(value)
                    and issubclass(value, BaseException)
                    and value.__module__ == module.__name__
                ):
                    found[f"{module.__name__}.{name}"] = value
    return found


def test_every_exception_talon_defines_is_a_talon_error_or_named_control_flow() -> None:
    defined = _defined_exceptions()
    outside = {name for name, cls in defined.items() if not issubclass(cls, TalonError)}

    assert outside == set(CONTROL_FLOW), (
        "add the error to a branch of gateway.errors (or, if only its own module catches it, to CONTROL_FLOW)"
    )


def test_every_public_error_is_in_its_branch_and_only_there() -> None:
    defined = set(_defined_exceptions().values())
    public = {cls for cls in defined if issubclass(cls, TalonError) and not cls.__name__.startswith("_")}
    unlisted = public - set(BRANCH_OF) - set(BRANCHES) - {TalonError}

    assert not unlisted, f"say which branch these belong to in BRANCH_OF: {unlisted}"
    for cls, branch in BRANCH_OF.items():
        assert [b for b in BRANCHES if issubclass(cls, b)] == [branch], cls


def test_public_errors_are_named_error() -> None:
    public = [cls for cls in _defined_exceptions().values() if issubclass(cls, TalonError)]

    assert [cls.__name__ for cls in public if not cls.__name__.endswith("Error")] == []


@pytest.mark.parametrize("cls", [JSONInputError, ScheduleError, OutputError], ids=lambda c: c.__name__)
def test_errors_callers_catch_as_value_error_still_are_one(cls: type[TalonError]) -> None:
    assert issubclass(cls, ValueError)


def test_the_branches_do_not_overlap() -> None:
    for one, other in itertools.combinations(BRANCHES, 2):
        assert not issubclass(one, other) and not issubclass(other, one), (one, other)


def test_a_config_error_lists_its_problems_one_per_line() -> None:
    several = ConfigError(["channels[0].token: required", "bindings[0].persona: unknown"])
    single = SandboxError("cwd /nope is not a directory")

    assert several.problems == ["channels[0].token: required", "bindings[0].persona: unknown"]
    assert str(several) == "channels[0].token: required\nbindings[0].persona: unknown"
    assert single.problems == ["cwd /nope is not a directory"] and str(single) == single.problems[0]


def test_a_platform_error_says_whether_trying_again_may_help() -> None:
    assert ConnectorStartError("token rejected").transient is False
    assert ProviderError("HTTP 503", transient=True).transient is True
    assert ProviderError("HTTP 401", transient=False).transient is False
