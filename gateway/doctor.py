"""``talon doctor``: check what `talon run` needs, and say how to fix what is wrong."""

from __future__ import annotations

import os
from pathlib import Path

from gateway.config import ConfigError, Settings
from gateway.data_dir import LOCK_FILE
from gateway.runtime.model import ChatMessage, ModelRequest, ProviderError
from gateway.store.db import DB_FILE


class Report:
    def __init__(self) -> None:
        self.errors = 0

    def ok(self, what: str) -> None:
        print(f"  ok    {what}")

    def warn(self, what: str) -> None:
        print(f"  warn  {what}")

    def fail(self, what: str) -> None:
        self.errors += 1
        print(f"  FAIL  {what}")

    def fixed(self, what: str) -> None:
        print(f"  fixed {what}")


async def run_doctor(settings: Settings, *, config: Path | None, fix: bool = False) -> int:
    """Check ``settings`` (read from ``config``; None: the built-in defaults); with ``fix``,
    repair what is safe to repair (the data dir's folder and modes) and say what was done."""
    from gateway.personas import load_personas
    from gateway.runtime.providers import build_provider

    report = Report()
    print("config")
    counts = f"{len(settings.channels)} channels, {len(settings.providers)} providers"
    if config is None:
        report.warn(
            f"no talon.yaml here: checking the built-in defaults ({counts}, data in {settings.data_path}); "
            "`talon init DIR` writes a config to edit"
        )
    else:
        report.ok(f"{config} valid ({counts})")
    try:
        personas = load_personas(settings)
        report.ok(f"personas: {', '.join(personas) or '(none)'}")
    except ConfigError as exc:
        personas = {}
        for problem in exc.problems:
            report.fail(problem)
    for i, ch in enumerate(settings.channels):
        if ch.type in _PLATFORMS and not ch.allowed_chats and not ch.allowed_users:  # type: ignore[union-attr]
            report.warn(
                f"channels[{i}] ({ch.name}): anyone who can reach this {_PLATFORMS[ch.type]} bot can talk to "
                "it; set allowed_users or allowed_chats"
            )

    from gateway.persona_mcp.doctor import doctor_findings

    findings = doctor_findings(personas.values())
    if findings:
        print("persona mcp servers")
    for level, text in findings:
        getattr(report, level)(text)

    shell_users = [
        p.name for p in personas.values() if any(c.startswith("shell.exec") for c in p.capabilities)
    ]
    if shell_users:
        from gateway.sandbox import sandbox_problem

        print("workspace shell")
        problem = sandbox_problem(
            fix="do without bash, wait_for and git_read, which are not offered until then"
        )
        if problem:
            report.warn(f"{problem} (shell.exec: {', '.join(shell_users)})")
        else:
            report.ok(f"bubblewrap sandbox works for bash ({', '.join(shell_users)})")

    browser_users = ", ".join(p.name for p in personas.values() if "browser.use" in p.capabilities)
    if browser_users:
        from gateway.chromium import browser_problem, find_chromium

        print("browser")
        problem = browser_problem(settings.browser)
        if problem:
            report.warn(
                f"{problem}; the browser tools are not offered until then (browser.use: {browser_users})"
            )
        else:
            found = find_chromium(settings.browser.executable)
            report.ok(f"Chromium at {found} drives the browser tools ({browser_users})")

    from gateway.voice.doctor import voice_findings

    voice = voice_findings(settings)
    if voice:
        print("voice")
    for level, text in voice:
        getattr(report, level)(text)

    from gateway.http.doctor import http_findings

    served = http_findings(settings)
    if served:
        print("http")
    for level, text in served:
        getattr(report, level)(text)

    print("data dir")
    _check_data_dir(settings, report, fix)

    from gateway.database_doctor import database_findings

    stored = await database_findings(settings, list(personas.values()))
    if stored:
        print("database")
    for level, text in stored:
        getattr(report, level)(text)

    print("providers")
    used = {(p.provider, p.model) for p in personas.values()}
    for provider_name, model in sorted(used):
        provider = build_provider(provider_name, settings.providers[provider_name])
        request = ModelRequest(
            model, "Reply with OK.", (ChatMessage("user", "ping"),), max_tokens=8, timeout=20
        )
        try:
            await provider.complete(request)
            report.ok(f"{provider_name}:{model} answered")
        except ProviderError as exc:
            report.fail(f"{provider_name}:{model}: {exc}")
        finally:
            await provider.aclose()
    if not used:
        report.warn("no persona uses a provider yet")

    if os.environ.get("TALON_CONFIG"):
        report.ok(f"TALON_CONFIG={os.environ['TALON_CONFIG']}")
    print("\n" + ("all good" if not report.errors else f"{report.errors} problem(s)"))
    return 0 if not report.errors else 1


_PLATFORMS = {"telegram": "Telegram", "slack": "Slack", "discord": "Discord"}
# Files `talon run` creates owner-only in the data dir.
_OWNER_ONLY_FILES = (DB_FILE, f"{DB_FILE}-wal", f"{DB_FILE}-shm", LOCK_FILE)


def _check_data_dir(settings: Settings, report: Report, fix: bool) -> None:
    """The data dir exists, is writable and owner-only, and so are the files in it; nothing is
    created or changed unless ``fix``."""
    data = settings.data_path
    if not data.exists():
        if not fix:
            report.warn(f"{data} does not exist yet; `talon run` creates it (or `talon doctor --fix` now)")
            return
        try:
            data.mkdir(mode=0o700, parents=True)
            os.chmod(data, 0o700)
        except OSError as exc:
            report.fail(f"{data}: cannot create it: {exc}; fix permissions or change data_dir")
            return
        report.fixed(f"created {data} (mode 700)")
    if not data.is_dir():
        report.fail(f"{data} is not a directory; change data_dir")
        return
    if not os.access(data, os.W_OK | os.X_OK):
        report.fail(f"{data} is not writable by this user; fix its owner or change data_dir")
        return
    log_file = settings.log_file.path
    paths = [data, *(data / name for name in _OWNER_ONLY_FILES)]
    if log_file is not None:
        paths.append(data / log_file)
    loose = 0
    for path in paths:
        if not path.exists():
            continue
        mode = path.stat().st_mode & 0o777
        if not mode & 0o077:
            continue
        want = 0o700 if path.is_dir() else 0o600
        if fix:
            try:
                os.chmod(path, want)
                report.fixed(f"{path}: mode {mode:o} -> {want:o}")
                continue
            except OSError as exc:
                report.fail(f"{path} is mode {mode:o} and cannot be changed: {exc}")
                continue
        loose += 1
        report.warn(f"{path} is mode {mode:o}, readable by others; `talon doctor --fix` makes it {want:o}")
    if not loose:
        report.ok(f"{data} writable and owner-only")
