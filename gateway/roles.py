"""Sender roles: which role a turn's senders hold, and the persona as that role holds it.

A chat channel's ``roles`` name its owners, admins and guests (everyone else is a member);
the console's one user is its owner. A persona's ``role_capabilities`` say which of its labels
each role may use; :func:`gateway.labels.role_labels` decides. A turn answering several
senders runs as the narrowest of their roles. The persona a turn runs as carries the narrowed
labels, so the tool list, the tool instructions, the bridge's checks and every child agent
(whose labels are narrowed from its parent's) see only those.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from gateway.config import Settings
from gateway.labels import narrowest_role, role_labels
from gateway.personas import Persona

__all__ = ["as_role", "batch_role"]


def batch_role(settings: Settings, channel: str, sender_ids: Iterable[str]) -> str | None:
    """The narrowest role among ``sender_ids`` in ``channel``; ``None`` without senders (a
    scheduled turn, a delegated task: the persona's own labels apply)."""
    senders = [s for s in sender_ids if s]
    if not senders:
        return None
    configured = settings.channel(channel)
    roles = getattr(configured, "roles", None)
    if roles is None:  # the console (or an unknown channel): the daemon's owner
        return "owner"
    return narrowest_role(roles.role_of(s) for s in senders)


def as_role(persona: Persona, role: str | None) -> Persona:
    """``persona`` with the labels ``role`` holds (the same object when nothing narrows)."""
    labels = role_labels(persona.capabilities, persona.role_capabilities, role)
    if role is None or (labels == persona.capabilities and persona.role == role):
        return persona
    return dataclasses.replace(persona, capabilities=labels, role=role)
