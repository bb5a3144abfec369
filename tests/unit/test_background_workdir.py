"""Where a background agent works: its profile's shared workspace, never the persona folder
that holds every thread's workspace."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gateway.config import Settings, load_settings
from gateway.delegation import Delegation, DelegationError
from gateway.personas import load_personas
from gateway.store import delegation as tasks
from gateway.store.db import open_database
from gateway.workspaces import shared_workspace, thread_folder
from tests.harness import write_config
from tests.store_helpers import fetch_rows

PROVIDER = {"type": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key": "none"}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    config = write_config(
        tmp_path,
        provider=PROVIDER,
        extra={"bindings": [{"channel": "console", "persona": "alice"}]},
        personas={
            "alice": {"capabilities": ["subagent.background"]},
            "ops": {"workspace": {"path": "repo", "read_only": True}},
        },
    )
    (tmp_path / "personas" / "ops" / "repo").mkdir()
    return load_settings(config)


@pytest.fixture
async def delegation(settings: Settings) -> AsyncIterator[Delegation]:
    db = await open_database(settings.data_path / "talon.db")
    await db.migrate()
    service = Delegation(
        db=db,
        settings=settings,
        personas=load_personas(settings),
        notify=lambda _thread_id: None,
        park=contextlib.nullcontext,
        cancel_turn=lambda _thread_id: False,
    )
    try:
        yield service
    finally:
        await db.close()


async def origin_thread(service: Delegation) -> int:
    return await service.db.run_transaction(
        lambda conn: (
            conn.execute(
                "INSERT INTO threads (channel, chat_id, persona, created_at, updated_at) "
                "VALUES ('console', ?, 'alice', 0, 0)",
                (uuid.uuid4().hex,),
            ).lastrowid
        )
    )


async def spawned_in(service: Delegation, working_directory: str | None, profile: str = "alice") -> Path:
    origin = await origin_thread(service)
    spawned = await service.spawn(
        persona="alice",
        origin_thread_id=origin,
        prompt="index the notes",
        profile=profile,
        provider=None,
        working_directory=working_directory,
        timeout_minutes=None,
        providers={},
    )
    task = await service.db.read(tasks.background_task, spawned["taskId"], origin)
    assert task is not None
    return Path(task.working_directory)


def other_thread(settings: Settings) -> Path:
    """Another thread's workspace of alice, with a file in it."""
    folder = thread_folder(settings.workspaces_path, "alice", 1)
    folder.mkdir(parents=True)
    (folder / "secret.txt").write_text("not for background agents", encoding="utf-8")
    return folder.resolve()


def shared_of(settings: Settings, service: Delegation, persona: str) -> Path:
    return shared_workspace(settings, service.personas[persona]).resolve()


async def test_a_background_agent_works_in_the_shared_workspace_by_default(
    settings: Settings, delegation: Delegation
) -> None:
    thread = other_thread(settings)
    workdir = await spawned_in(delegation, None)
    assert workdir == shared_of(settings, delegation, "alice")
    assert workdir not in thread.parents


async def test_a_threads_path_stays_inside_the_shared_workspace(
    settings: Settings, delegation: Delegation
) -> None:
    thread = other_thread(settings)
    workdir = await spawned_in(delegation, "threads/1")
    assert workdir == shared_of(settings, delegation, "alice") / "threads" / "1"
    assert workdir != thread and workdir not in thread.parents
    assert not (workdir / "secret.txt").exists()


@pytest.mark.parametrize("requested", ["..", "../threads/1", "/etc", "sub/../../threads"])
async def test_a_path_outside_the_shared_workspace_is_refused(
    settings: Settings, delegation: Delegation, requested: str
) -> None:
    with pytest.raises(DelegationError, match="outside the persona's workspace") as refused:
        await spawned_in(delegation, requested)
    assert str(shared_of(settings, delegation, "alice")) in str(refused.value)
    assert await fetch_rows(delegation.db, "SELECT id FROM background_tasks") == []


async def test_a_link_out_of_the_shared_workspace_is_refused(
    settings: Settings, delegation: Delegation
) -> None:
    thread = other_thread(settings)
    shared = shared_of(settings, delegation, "alice")
    shared.mkdir(parents=True, exist_ok=True)
    (shared / "peek").symlink_to(thread, target_is_directory=True)
    with pytest.raises(DelegationError, match="outside the persona's workspace"):
        await spawned_in(delegation, "peek")


async def test_an_operator_folder_is_the_shared_workspace_and_stays_unwritten(
    settings: Settings, delegation: Delegation
) -> None:
    repo = shared_of(settings, delegation, "ops")
    assert await spawned_in(delegation, None, profile="ops") == repo
    with pytest.raises(DelegationError, match="read-only"):
        await spawned_in(delegation, "build", profile="ops")
    assert not (repo / "build").exists()
