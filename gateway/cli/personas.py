"""``talon personas [NAME]``: what each persona is and may do, read from the config alone."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gateway.cli.common import CommandError, settings_for
from gateway.config import Settings

if TYPE_CHECKING:
    from gateway.personas import Persona

__all__ = ["register"]


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "personas",
        parents=[common],
        help="the personas: model, channels, capability labels and the tools they list",
        description="Without NAME, one line per persona; with NAME, everything it may do. Read from "
        "talon.yaml and the persona folders: no daemon needed.",
    )
    p.add_argument("name", nargs="?", metavar="NAME", help="one persona to show in full")
    p.set_defaults(handler=cmd_personas)


def cmd_personas(args: argparse.Namespace) -> int:
    from gateway.personas import load_personas

    settings = settings_for(args)
    personas = load_personas(settings)
    if args.name is None:
        if not personas:
            print(f"no personas in {settings.personas_path}")
        for persona in personas.values():
            channels = ", ".join(_channels(settings, persona.name)) or "not bound"
            print(f"{persona.name:<16} {persona.model_ref:<36} {channels:<24} {persona.description or ''}")
        return 0
    persona = personas.get(args.name)
    if persona is None:
        known = ", ".join(personas) or "(none)"
        raise CommandError(f"no persona named {args.name!r} in {settings.personas_path}; use one of {known}")
    print("\n".join(describe(settings, persona)))
    return 0


def describe(settings: Settings, persona: Persona) -> list[str]:
    """The full card of one persona, as lines."""
    from tools.registry import tools_for

    lines = [
        f"{persona.name}  ({persona.path})",
        f"  model:        {persona.model_ref}",
        f"  fallbacks:    {', '.join(persona.fallbacks) or 'none'}",
        f"  description:  {persona.description or '-'}",
        f"  channels:     {', '.join(_channels(settings, persona.name)) or 'not bound (no binding names it)'}",
        "  capabilities:" + ("" if persona.capabilities else " none: it is offered no host tools"),
    ]
    for label in persona.capabilities:
        tools = ", ".join(t.mcp_name for t in tools_for([label])) or "no tools"
        lines.append(f"    {label:<28} {tools}")
    lines += _roles(persona)
    lines.append("  mcp servers:" + ("" if persona.mcp_servers else "  none"))
    for name, server in persona.mcp_servers.items():
        where = server.get("url") or " ".join(
            str(p) for p in [server.get("command"), *server.get("args", [])]
        )
        lines.append(f"    {name:<28} {where}")
    lines.append(f"  sub-agents:   {', '.join(persona.subagents) or 'none'}")
    return lines


def _roles(persona: Persona) -> list[str]:
    """What each sender role holds of the persona's labels (channels' ``roles`` assign them)."""
    from gateway.labels import ROLES, role_labels

    if not persona.role_capabilities:
        return ["  roles:        every role holds all capabilities (no role_capabilities)"]
    lines = ["  roles:"]
    for role in ROLES:
        if role not in persona.role_capabilities:
            lines.append(f"    {role:<28} all capabilities")
            continue
        held = role_labels(persona.capabilities, persona.role_capabilities, role)
        lines.append(f"    {role:<28} {', '.join(held) or 'none: no host tools'}")
    return lines


def _channels(settings: Settings, persona: str) -> list[str]:
    return [
        b.channel if b.chat is None else f"{b.channel} (chat {b.chat})"
        for b in settings.bindings
        if b.persona == persona
    ]
