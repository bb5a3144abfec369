"""Capability labels: the grammar ``domain.action[:scope]`` and the one decision function.

A persona's ``capabilities`` list holds labels such as ``channel.send:team-slack`` or
``db.query:own``. A prefix takes no scope, a name chosen by the operator (or ``*``), or one
of a fixed list of scope words written ``a|b``, narrowest first (``fs.read:thread|persona``). A tool is listed to a persona only when one of its labels carries the
tool's prefix, and the bridge asks :func:`check` again before running the tool, this time
enforcing the label's scope against the call's arguments. Both paths go through
:func:`_grants`, so listing and execution can never disagree.

Invalid labels grant nothing; the persona loader reports them through :func:`label_problem`.

This module imports nothing from ``gateway``, ``connectors`` or ``tools``: the persona loader
and the tool registry both build on it. A tool is anything shaped like :class:`LabelledTool`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "ANY",
    "KNOWN_LABELS",
    "MEMORY_SCOPES",
    "ROLES",
    "STATE_SCOPES",
    "WORKSPACE_SCOPES",
    "Decision",
    "LabelledTool",
    "ParsedLabel",
    "check",
    "example_label",
    "granted_scopes",
    "holds",
    "label_problem",
    "may_list",
    "narrow_labels",
    "narrowest_role",
    "parse_label",
    "role_labels",
    "tool_prefixes",
]

ANY = "*"
_NAMED = "<name>"  # the scope is ``*`` or a name chosen by the operator

# prefix -> the scope it takes: None (no scope), _NAMED, or the one fixed scope word.
KNOWN_LABELS: Mapping[str, str | None] = {
    "channel.send": _NAMED,
    "memory.access": "thread|user|persona",
    "net.http": "egress",
    "db.query": "own",
    "schedule.manage": "own",
    "subagent.invoke": None,
    "subagent.background": None,
    "persona.send": _NAMED,
    "fs.read": "thread|persona",
    "fs.write": "thread|persona",
    "shell.exec": "sandbox",
    "git.read": None,
    "state.read": "persona|team",
    "state.write": "persona|team",
    "agent.dispatch": None,
    "model.complete": None,
    "skill.use": None,
    "jobs.manage": None,
    "workspace.share": None,
    "runtime.inspect": None,
    "web.search": None,
    "chat.ask": None,
    "browser.use": None,
    "image.generate": None,
    # Granted by the runtime to a child agent whose parent asked for progress_events.
    "agent.progress": None,
}
# What each scope word of the workspace labels opens: ``thread`` the thread's workspace
# (``/workspace``), ``persona`` that and the persona's shared workspace (``/shared``).
WORKSPACE_SCOPES: Mapping[str, tuple[str, ...]] = {
    "thread": ("/workspace",),
    "persona": ("/workspace", "/shared"),
}
# Whose documents each scope word of the state labels opens: ``persona`` the persona's own,
# ``team`` those and the documents shared by every persona.
STATE_SCOPES: Mapping[str, tuple[str, ...]] = {
    "persona": ("persona",),
    "team": ("persona", "team"),
}
# Whose memory each scope word of ``memory.access`` opens: ``thread`` the thread's, ``user``
# that and the memory of the sender a turn answers, ``persona`` those and the persona's own.
MEMORY_SCOPES: Mapping[str, tuple[str, ...]] = {
    "thread": ("thread",),
    "user": ("thread", "user"),
    "persona": ("thread", "user", "persona"),
}
# How a named scope is described in messages.
_NAMED_HINT = {"channel.send": "<channel>", "persona.send": "<persona>"}

_LABEL = re.compile(r"^(?P<prefix>[a-z][a-z0-9_]*\.[a-z][a-z0-9_]*)(?::(?P<scope>.*))?$")
_SCOPE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


@dataclass(frozen=True, slots=True)
class ParsedLabel:
    """A label split into its capability prefix and scope (``None`` when it has none)."""

    prefix: str
    scope: str | None


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of :func:`check`.

    Attributes:
        allowed (:obj:`bool`): Whether the call may run.
        reason (:obj:`str`): Which label allowed it, or why it was refused and what would fix it.
    """

    allowed: bool
    reason: str


class LabelledTool(Protocol):
    """What the decision reads of a tool (:class:`tools.base.HostTool` has it)."""

    @property
    def mcp_name(self) -> str:
        """The name the model calls the tool by."""

    @property
    def prefix(self) -> str:
        """The capability prefix a label must carry (``channel.send``)."""

    @property
    def scope_arg(self) -> str | None:
        """The argument a label's scope restricts, or ``None``."""

    # Optional: ``prefix_by_arg = (argument, {value: prefix})``, a call whose argument has one of
    # those values needing that prefix instead of ``prefix`` (web_scrape's search mode).


def tool_prefixes(tool: LabelledTool) -> tuple[str, ...]:
    """Every prefix a call of ``tool`` may need: its ``prefix``, then those of ``prefix_by_arg``."""
    by_arg = getattr(tool, "prefix_by_arg", None)
    extra = tuple(dict.fromkeys(by_arg[1].values())) if by_arg else ()
    return (tool.prefix, *(p for p in extra if p != tool.prefix))


def _call_prefix(tool: LabelledTool, args: Mapping[str, Any]) -> str:
    """The prefix this call of ``tool`` needs, given its arguments."""
    by_arg = getattr(tool, "prefix_by_arg", None)
    if by_arg:
        value = args.get(by_arg[0])
        if isinstance(value, str) and value in by_arg[1]:
            return by_arg[1][value]
    return tool.prefix


def _usage(prefix: str) -> str:
    scope = KNOWN_LABELS[prefix]
    if scope is None:
        return prefix
    if scope == _NAMED:
        return f"{prefix}:{_NAMED_HINT.get(prefix, _NAMED)}|*"
    return f"{prefix}:{scope}"


def _known_list() -> str:
    return ", ".join(_usage(p) for p in KNOWN_LABELS)


def parse_label(label: str) -> ParsedLabel | None:
    """Split a valid label; ``None`` when :func:`label_problem` would report a problem."""
    if label_problem(label) is not None:
        return None
    prefix, _, scope = label.partition(":")
    return ParsedLabel(prefix, scope if ":" in label else None)


def label_problem(label: Any) -> str | None:
    """Say what is wrong with a capability label.

    Args:
        label (:obj:`str`): A label as written in ``persona.yaml``.

    Returns:
        :obj:`str` | :obj:`None`: ``None`` for a valid label, otherwise a message naming the
        label and how to fix it.
    """
    if not isinstance(label, str):
        return f"capability label {label!r} must be a string such as 'db.query:own'; known: {_known_list()}"
    match = _LABEL.match(label)
    if not match or match["prefix"] not in KNOWN_LABELS:
        prefix = match["prefix"] if match else label.partition(":")[0].strip().lower()
        close = difflib.get_close_matches(prefix, list(KNOWN_LABELS), n=1)
        hint = f" (did you mean {_usage(close[0])!r}?)" if close else ""
        return f"unknown capability label {label!r}{hint}; known: {_known_list()}"
    prefix, scope = match["prefix"], match["scope"]
    expected = KNOWN_LABELS[prefix]
    if expected is None:
        if scope is not None:
            return f"capability label {label!r}: {prefix} takes no scope; write {prefix!r}"
        return None
    if scope is None or scope == "":
        return f"capability label {label!r} needs a scope; write {_usage(prefix)!r}"
    if expected == _NAMED:
        if scope != ANY and not _SCOPE_NAME.match(scope):
            return (
                f"capability label {label!r}: scope {scope!r} must be '*' or a lower-case name "
                f"(letters, digits, '-' and '_'); write {_usage(prefix)!r}"
            )
        return None
    words = _words(expected)
    if scope not in words:
        only = f"the scope {expected!r}" if len(words) == 1 else f"one of the scopes {', '.join(words)}"
        return f"capability label {label!r}: {prefix} only takes {only}; write {_usage(prefix)!r}"
    return None


def _words(scope: str) -> tuple[str, ...]:
    return tuple(scope.split("|"))


def example_label(prefix: str) -> str:
    """The widest valid label of ``prefix``: ``git.read``, ``channel.send:*``, ``fs.read:persona``."""
    scope = KNOWN_LABELS[prefix]
    if scope is None:
        return prefix
    if scope == _NAMED:
        return f"{prefix}:{ANY}"
    return f"{prefix}:{_words(scope)[-1]}"


def granted_scopes(labels: Iterable[str], prefix: str) -> frozenset[str]:
    """The scopes of the valid labels in ``labels`` that carry ``prefix`` (``{"thread"}``).

    Tools whose scope is not one argument (the workspace tools: the scope decides which
    roots a path may reach) ask this; it reads the same grants as :func:`check`.
    """
    return frozenset(g.scope for g in _grants(labels, prefix) if g.scope is not None)


def _grants(labels: Iterable[str], prefix: str) -> list[ParsedLabel]:
    """The valid labels that carry ``prefix`` (the core shared by listing and checking)."""
    found = []
    for label in labels:
        parsed = parse_label(label)
        if parsed is not None and parsed.prefix == prefix:
            found.append(parsed)
    return found


def may_list(labels: Iterable[str], tool: LabelledTool) -> bool:
    """Whether ``tool`` is offered to a persona holding ``labels``: a label carries one of the
    tool's prefixes (:func:`tool_prefixes`).

    Args:
        labels (Iterable[:obj:`str`]): The persona's capability labels.
        tool (:class:`LabelledTool`): The tool in question.
    """
    held = tuple(labels)
    return any(holds(held, prefix) for prefix in tool_prefixes(tool))


def holds(labels: Iterable[str], prefix: str) -> bool:
    """Whether a valid label of ``labels`` carries ``prefix``, whatever its scope."""
    return bool(_grants(labels, prefix))


def check(labels: Iterable[str], tool: LabelledTool, args: Mapping[str, Any]) -> Decision:
    """Decide whether a persona holding ``labels`` may call ``tool`` with ``args``.

    A label must carry the prefix this call needs (the tool's ``prefix``, or the one its
    ``prefix_by_arg`` names for the call's arguments), and when the tool has a ``scope_arg`` the
    value of that argument must be allowed by a label's scope: ``*`` allows any value, a
    name allows exactly that value.

    Args:
        labels (Iterable[:obj:`str`]): The persona's capability labels.
        tool (:class:`LabelledTool`): The tool being called.
        args (Mapping[:obj:`str`, Any]): The call's arguments.

    Returns:
        :class:`Decision`
    """
    prefix = _call_prefix(tool, args)
    grants = _grants(labels, prefix)
    if not grants:
        by_arg = getattr(tool, "prefix_by_arg", None)
        what = tool.mcp_name
        if by_arg and prefix != tool.prefix:
            what += f" with {by_arg[0]} {args.get(by_arg[0])!r}"
        return Decision(
            False, f"{what} needs the capability {_usage(prefix)!r}, which this persona does not hold"
        )
    if tool.scope_arg is None:
        return Decision(True, f"allowed by {_render(grants[0])}")
    if any(g.scope == ANY for g in grants):
        return Decision(True, f"allowed by {prefix}:{ANY}")
    value = args.get(tool.scope_arg)
    allowed = [g.scope for g in grants if g.scope is not None]
    if not isinstance(value, str) or not value:
        return Decision(
            False,
            f"{tool.mcp_name} needs {tool.scope_arg} as a non-empty string; allowed: {', '.join(allowed)}",
        )
    if value in allowed:
        return Decision(True, f"allowed by {prefix}:{value}")
    return Decision(
        False,
        f"{tool.scope_arg} {value!r} is not permitted for this persona; "
        f"its labels allow only {', '.join(repr(a) for a in allowed)}",
    )


def _render(label: ParsedLabel) -> str:
    return label.prefix if label.scope is None else f"{label.prefix}:{label.scope}"


def narrow_labels(held: Iterable[str], allowed: Iterable[str]) -> tuple[str, ...]:
    """The labels of ``held`` that ``allowed`` also grants, each at the narrower scope of the two.

    A child agent holds this of its parent's labels and its type's allowlist, so it never holds
    a label its parent lacks: ``fs.read:persona`` and ``fs.read:thread`` give ``fs.read:thread``,
    ``channel.send:*`` and ``channel.send:team`` give ``channel.send:team``.
    """
    grants = [g for g in (parse_label(a) for a in allowed) if g is not None]
    out: list[str] = []
    for label in held:
        mine = parse_label(label)
        if mine is None:
            continue
        for other in (g for g in grants if g.prefix == mine.prefix):
            scope = _narrower(mine.prefix, mine.scope, other.scope)
            if scope is not False:
                rendered = _render(ParsedLabel(mine.prefix, scope))
                if rendered not in out:
                    out.append(rendered)
    return tuple(out)


def _narrower(prefix: str, a: str | None, b: str | None) -> str | bool | None:
    """The narrower of two scopes of ``prefix``, or ``False`` when they share nothing."""
    if a == b:
        return a
    expected = KNOWN_LABELS[prefix]
    if expected == _NAMED:
        if a == ANY:
            return b
        return a if b == ANY else False
    words = _words(expected or "")
    return a if words.index(a or "") < words.index(b or "") else b


# Sender roles, narrowest first: a channel's ``roles`` name owners, admins and guests; every
# other sender is a member.
ROLES: tuple[str, ...] = ("guest", "member", "admin", "owner")


def narrowest_role(roles: Iterable[str]) -> str | None:
    """The narrowest of ``roles`` (a batch with a guest's message runs as the guest), or ``None``."""
    ranked = [ROLES.index(r) for r in roles if r in ROLES]
    return ROLES[min(ranked)] if ranked else None


def role_labels(
    held: Sequence[str], role_capabilities: Mapping[str, Sequence[str]], role: str | None
) -> tuple[str, ...]:
    """The labels a turn holds: the persona's ``held`` labels narrowed by the sender's ``role``.

    ``role_capabilities`` is the persona's ``role_capabilities``: a role it lists holds
    :func:`narrow_labels` of the persona's labels and that list; a role it does not list (or no
    role: a scheduled turn, a delegated task) keeps every label of the persona.
    """
    if role is None or role not in role_capabilities:
        return tuple(held)
    return narrow_labels(held, role_capabilities[role])
