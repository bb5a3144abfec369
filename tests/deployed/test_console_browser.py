"""The web console as operators use it: ``talon run`` as a subprocess with ``http:`` and
``console:``, users made by ``talon users add``, and Debian's Chromium driven by Playwright.

Signed-out visitors land on the sign-in form; an admin opens a thread and sees its messages and
its run's trace, retries a dead letter and pauses a schedule (which ``talon schedules`` then
shows); the overview updates live; a viewer sees no buttons and a change it forges is refused,
as is one without the CSRF token; a stored ``<script>``, ``javascript:`` link and HTML stay text.
"""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from playwright.async_api import expect

from tests.console_seed import seed
from tests.deployed.support import (
    add_console_user,
    deployed_daemon,
    fake_process,
    sign_in,
    write_deployed_config,
)
from tests.e2e.daemon import talon
from tools.browser.chromium import find_chromium

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        find_chromium(None) is None, reason="no Chromium installed (apt-get install chromium)"
    ),
]

NOWHERE = "http://127.0.0.1:9"  # Chromium's own traffic goes to a closed loopback port


async def _browser() -> AsyncIterator[object]:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=find_chromium(None),
            chromium_sandbox=os.geteuid() != 0,
            proxy={"server": NOWHERE, "bypass": "127.0.0.1"},
            args=["--disable-background-networking", "--disable-component-update", "--no-first-run"],
            headless=True,
        )
        try:
            yield browser
        finally:
            await browser.close()


async def test_operators_use_the_console_in_a_real_browser(tmp_path: Path) -> None:
    async with fake_process("tests.fakes.model_api", tmp_path, "--kind", "openai") as model:
        config = write_deployed_config(
            tmp_path, model_url=model.url, channels=[{"name": "console", "type": "console"}]
        )
        users = [
            await add_console_user(config, "ada", "admin"),
            await add_console_user(config, "val", "viewer"),
        ]
        raw = yaml.safe_load(config.read_text())
        raw["http"] = {"listen": "127.0.0.1:0"}
        raw["console"] = {"users": users}
        config.write_text(yaml.safe_dump(raw))
        code, _, err = await talon("migrate", "-c", str(config))
        assert code == 0, err
        db_path = tmp_path / "data" / "talon.db"
        with sqlite3.connect(db_path) as conn:
            seeded = seed(conn)
        async with deployed_daemon(config) as daemon:
            base = (tmp_path / "data" / "http.url").read_text().strip() + "/console"
            async for browser in _browser():
                admin = await browser.new_page()
                await admin.goto(f"{base}/threads/{seeded.thread_id}")
                assert "/console/login" in admin.url  # signed out: the form, then back here
                await sign_in(admin, f"{base}/threads/{seeded.thread_id}", "ada")

                # The thread: its messages, the hostile one as plain text, nothing run.
                messages = admin.locator(".message .text")
                assert "message 0 of thread 0" in await messages.first.inner_text()
                texts = await messages.all_inner_texts()
                assert any("<script>window.pwned = 1</script>" in t for t in texts)
                assert await admin.evaluate("window.pwned") is None
                assert await admin.locator("a[href^='javascript:']").count() == 0
                assert await admin.locator("main img, main b, main script").count() == 0

                # Its run's trace with the tool call.
                await admin.click(f"a[href='/console/runs/{seeded.run_id}']")
                trace = admin.locator("table.trace")
                assert "memory_update" in await trace.inner_text()
                assert await admin.locator("tr.event.model_call").count() == 2

                # The overview: live over the event stream; retry the dead letter.
                await admin.goto(f"{base}/")
                # A locator assertion, not wait_for_function: a string predicate is
                # re-evaluated with eval(), which the console's CSP rightly refuses.
                await expect(admin.locator("#live")).to_have_text(re.compile(r"^live ·"))
                row = admin.locator(f"#dead-letter-{seeded.dead_letter}")
                await row.locator("button", has_text="Retry").click()
                assert "retry done" in await admin.locator(".done").inner_text(), admin.url
                assert await admin.locator(f"#dead-letter-{seeded.dead_letter}").count() == 0

                # Pause the schedule; the CLI sees it through the daemon.
                await admin.goto(f"{base}/schedules")
                schedule = admin.locator(f"#schedule-{seeded.schedule_id}")
                await schedule.locator("button", has_text="Pause").click()
                assert "pause done" in await admin.locator(".done").inner_text(), admin.url
                assert (
                    await admin.locator(f"#schedule-{seeded.schedule_id} .enabled").inner_text() == "paused"
                )
                code, out, err = await talon("schedules", "-c", str(config))
                assert code == 0, err
                assert (
                    seeded.schedule_id in out and " no " in out.split(seeded.schedule_id, 1)[1].split("\n")[0]
                )

                # A change without the session's CSRF token is refused, even from the admin's page.
                forged = await admin.evaluate(
                    """async (path) => (await fetch(path, {method: "POST",
                        body: new URLSearchParams({csrf: "guessed"})})).status""",
                    f"/console/schedules/{seeded.schedule_id}/resume",
                )
                assert forged == 403

                # A viewer sees no buttons, and a change with its own valid token is refused.
                viewer = await (await browser.new_context()).new_page()
                await viewer.goto(f"{base}/schedules")
                await sign_in(viewer, f"{base}/schedules", "val")
                assert await viewer.locator("main button").count() == 0
                refused = await viewer.evaluate(
                    """async (path) => {
                        const csrf = document.querySelector("input[name=csrf]").value;
                        const r = await fetch(path, {method: "POST", body: new URLSearchParams({csrf})});
                        return r.status; }""",
                    f"/console/schedules/{seeded.schedule_id}/resume",
                )
                assert refused == 403
            assert await daemon.stop() == 0
        with sqlite3.connect(db_path) as conn:
            enabled = conn.execute(
                "SELECT enabled FROM schedules WHERE id = ?", (seeded.schedule_id,)
            ).fetchone()
            assert enabled == (0,)
            status = conn.execute(
                "SELECT status FROM queue_items WHERE id = ?", (seeded.dead_letter,)
            ).fetchone()
            assert status[0] in ("pending", "leased", "done")
            audit = conn.execute(
                "SELECT tool, decision, detail FROM audit_log WHERE tool LIKE 'console.%' ORDER BY id"
            ).fetchall()
        assert ("console.dead_letter.retry", "allowed") in [(t, d) for t, d, _ in audit]
        assert ("console.schedule.resume", "refused") in [(t, d) for t, d, _ in audit]
        assert [d for t, d, _ in audit if t == "console.sign_in"] == ["allowed", "allowed"]
