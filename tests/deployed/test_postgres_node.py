"""The store on PostgreSQL as deployed: ``database.url`` from the environment, one daemon per
database (a second is refused, and takes over once the first is gone, even after kill -9), the
CLI reading the same database, and ``talon backup`` pointing at pg_dump."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import psycopg
import pytest

from gateway.store.db import code_schema_version
from tests.deployed.support import fake_process, log_failures, write_deployed_config
from tests.e2e.daemon import Daemon, talon, talon_env

pytestmark = pytest.mark.timeout(240)


def _node(root: Path, model_url: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    return write_deployed_config(
        root,
        model_url=model_url,
        channels=[{"name": "console", "type": "console"}],
        database={"url": "${TALON_DATABASE_URL}"},
    )


async def test_one_daemon_per_database_and_a_standby_takes_over_after_kill_9(
    tmp_path: Path, pg_server: object
) -> None:
    url = pg_server.new_database()  # type: ignore[attr-defined]
    env = talon_env({"TALON_DATABASE_URL": url})
    async with fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai") as model:
        first, standby = _node(tmp_path / "a", model.url), _node(tmp_path / "b", model.url)
        async with Daemon(first, env) as daemon:
            await daemon.start(first.parent / "data", ready_timeout=60)
            code, out, err = await talon("chat", "-c", str(first), "-m", "remember me", env=env)
            assert code == 0 and "remember me" in out, err

            code, _, err = await talon("run", "-c", str(standby), env=env, timeout=60)
            assert code == 1
            assert "another Talon daemon is running on this database" in err

            code, out, err = await talon("threads", "-c", str(first), env=env)
            assert code == 0 and "console" in out, err
            _, out, _ = await talon("doctor", "-c", str(standby), env=env)
            assert re.search(r"database\.url postgresql://talon@127\.0\.0\.1:\d+/\w+: PostgreSQL \d+", out), (
                out
            )
            assert f"schema version {code_schema_version()}, this Talon's" in out
            assert "a Talon daemon is running on this database; `talon run` here would be refused" in out
            code, _, err = await talon("backup", "-c", str(first), str(tmp_path / "copy.db"), env=env)
            assert code != 0 and "pg_dump" in err
            assert not (tmp_path / "copy.db").exists()
            await daemon.kill()

        # The lock went with the killed daemon's connection: the standby starts, on the same data.
        async with Daemon(standby, env) as daemon:
            await daemon.start(standby.parent / "data", ready_timeout=60)
            code, out, err = await talon("threads", "-c", str(standby), env=env)
            assert code == 0 and "console" in out, err
            code, out, err = await talon("chat", "-c", str(standby), "-m", "still here", env=env)
            assert code == 0 and "still here" in out, err
            assert await daemon.stop() == 0
    assert not (tmp_path / "a" / "data" / "talon.db").exists()
    assert not (tmp_path / "b" / "data" / "talon.db").exists()


async def test_a_database_url_that_is_not_postgresql_names_the_key_and_the_fix(tmp_path: Path) -> None:
    config = write_deployed_config(
        tmp_path,
        model_url="http://127.0.0.1:9/v1",
        channels=[{"name": "console", "type": "console"}],
        database={"url": "mysql://talon@127.0.0.1/talon"},
    )
    code, _, err = await talon("run", "-c", str(config))
    assert code != 0
    assert "database.url" in err and "postgresql://" in err


async def test_an_unreachable_server_is_one_clear_line(tmp_path: Path) -> None:
    config = write_deployed_config(
        tmp_path,
        model_url="http://127.0.0.1:9/v1",
        channels=[{"name": "console", "type": "console"}],
        database={"url": "postgresql://talon:hunter22@127.0.0.1:9/talon"},
    )
    code, _, err = await asyncio.wait_for(talon("run", "-c", str(config)), 60)
    assert code == 1
    assert "cannot open the database at postgresql://talon@127.0.0.1:9/talon" in err
    assert "hunter22" not in err
    assert "Traceback" not in err
    code, out, _ = await talon("doctor", "-c", str(config))
    assert code == 1
    assert "database.url postgresql://talon@127.0.0.1:9/talon: cannot connect" in out
    assert "hunter22" not in out


async def test_migrate_to_copies_a_sqlite_store_that_the_daemon_then_runs_on(
    tmp_path: Path, pg_server: object
) -> None:
    url = pg_server.new_database()  # type: ignore[attr-defined]
    async with fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai") as model:
        config = write_deployed_config(
            tmp_path, model_url=model.url, channels=[{"name": "console", "type": "console"}]
        )
        async with Daemon(config, talon_env()) as daemon:
            await daemon.start(tmp_path / "data", ready_timeout=60)
            for text in ("first words", "second words"):
                code, out, err = await talon("chat", "-c", str(config), "-m", text)
                assert code == 0 and text in out, err
            code, _, err = await talon("migrate", "-c", str(config), "--to", url)
            assert code != 0 and "stop" in err.lower(), "a running daemon's store is not copied"
            assert await daemon.stop() == 0
        _, on_sqlite, _ = await talon("threads", "-c", str(config))

        code, out, err = await talon("migrate", "-c", str(config), "--to", url)
        assert code == 0, err
        assert "every table's row count matches" in out and "messages" in out
        code, _, err = await talon("migrate", "-c", str(config), "--to", url)
        assert code != 0 and "not empty" in err

        env = talon_env({"TALON_DATABASE_URL": url})
        _node(tmp_path, model.url)  # the same folder, now with database.url
        async with Daemon(config, env) as daemon:
            await daemon.start(tmp_path / "data", ready_timeout=60)
            _, on_postgres, _ = await talon("threads", "-c", str(config), env=env)
            assert on_postgres == on_sqlite
            code, out, err = await talon("chat", "-c", str(config), "-m", "third words", env=env)
            assert code == 0 and "third words" in out, err
            assert await daemon.stop() == 0


async def test_a_node_whose_database_connection_is_cut_stops_so_a_standby_can_take_over(
    tmp_path: Path, pg_server: object
) -> None:
    url = pg_server.new_database()  # type: ignore[attr-defined]
    env = talon_env({"TALON_DATABASE_URL": url})
    async with fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai") as model:
        config = _node(tmp_path / "a", model.url)
        async with Daemon(config, env) as daemon:
            await daemon.start(config.parent / "data", ready_timeout=60)
            with psycopg.connect(url, autocommit=True) as admin:
                ended = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND application_name = 'talon-writer'"
                ).fetchall()
            assert ended == [(True,)], daemon.log()[-3000:]
            assert daemon.proc is not None
            code = await asyncio.wait_for(daemon.proc.wait(), 60)
    log = daemon.log()
    assert code == 1, log[-3000:]
    assert "lost the database connection that holds this node's lock" in log, log[-3000:]
    assert log_failures(log) == [], log[-3000:]
