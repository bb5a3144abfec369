"""Sender roles: the labels a turn holds are the persona's narrowed by its senders' role."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.config import RolesSettings, Settings
from gateway.labels import narrowest_role, role_labels
from gateway.personas import Persona
from gateway.roles import as_role, batch_role

PERSONA_LABELS = ("shell.exec:sandbox", "fs.read:persona", "memory.access:persona", "git.read")
ROLE_CAPS = {
    "guest": ("memory.access:thread",),
    "member": ("fs.read:thread", "memory.access:user", "git.read"),
    "admin": ("fs.read:persona", "git.read", "memory.access:persona", "channel.send:*"),
}


def test_a_listed_role_holds_only_what_both_grant_at_the_narrower_scope() -> None:
    assert role_labels(PERSONA_LABELS, ROLE_CAPS, "guest") == ("memory.access:thread",)
    assert role_labels(PERSONA_LABELS, ROLE_CAPS, "member") == (
        "fs.read:thread",
        "memory.access:user",
        "git.read",
    )
    # A role may not widen the persona: channel.send is not the persona's.
    assert "channel.send:*" not in role_labels(PERSONA_LABELS, ROLE_CAPS, "admin")
    assert "shell.exec:sandbox" not in role_labels(PERSONA_LABELS, ROLE_CAPS, "admin")


def test_a_role_not_listed_and_no_role_keep_every_label() -> None:
    assert role_labels(PERSONA_LABELS, ROLE_CAPS, "owner") == PERSONA_LABELS
    assert role_labels(PERSONA_LABELS, ROLE_CAPS, None) == PERSONA_LABELS
    assert role_labels(PERSONA_LABELS, {}, "guest") == PERSONA_LABELS


def test_an_empty_list_holds_nothing() -> None:
    assert role_labels(PERSONA_LABELS, {"guest": ()}, "guest") == ()


def test_the_narrowest_role_wins() -> None:
    assert narrowest_role(["owner", "guest", "member"]) == "guest"
    assert narrowest_role(["owner", "admin"]) == "admin"
    assert narrowest_role(["nonsense"]) is None
    assert narrowest_role([]) is None


def test_a_channel_names_roles_and_everyone_else_is_a_member() -> None:
    roles = RolesSettings(owner=[1, "2"], admin=["3"], guest=["4", "1"])
    assert roles.owner == ["1", "2"]
    assert roles.role_of("2") == "owner"
    assert roles.role_of("3") == "admin"
    assert roles.role_of("4") == "guest"
    assert roles.role_of("1") == "guest"  # listed twice: the narrower role
    assert roles.role_of("99") == "member"
    assert roles.role_of(None) == "member"


def _settings() -> Settings:
    return Settings.model_validate(
        {
            "channels": [
                {"name": "console", "type": "console"},
                {
                    "name": "tg",
                    "type": "telegram",
                    "token": "123:abc",
                    "roles": {"owner": ["1"], "guest": ["9"]},
                },
            ]
        }
    )


def test_a_batch_runs_as_its_narrowest_sender() -> None:
    settings = _settings()
    assert batch_role(settings, "tg", ["1"]) == "owner"
    assert batch_role(settings, "tg", ["1", "9"]) == "guest"
    assert batch_role(settings, "tg", ["5"]) == "member"
    assert batch_role(settings, "tg", []) is None  # a scheduled turn: the persona's own labels
    assert batch_role(settings, "console", ["local"]) == "owner"


@pytest.fixture
def persona(tmp_path: Path) -> Persona:
    return Persona(
        name="p",
        provider="fake",
        model="m",
        description=None,
        capabilities=PERSONA_LABELS,
        system_prompt="",
        path=tmp_path,
        role_capabilities=ROLE_CAPS,
    )


def test_the_persona_a_guest_turn_runs_as_carries_the_narrowed_labels(persona: Persona) -> None:
    guest = as_role(persona, "guest")
    assert guest.capabilities == ("memory.access:thread",)
    assert guest.role == "guest"
    assert as_role(persona, None) is persona
    assert as_role(persona, "owner").capabilities == PERSONA_LABELS
