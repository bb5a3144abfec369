"""``talon doctor``: check what `talon run` needs, and say how to fix what is wrong."""

from __future__ import annotations

import os
import tempfile

from gateway.config import ConfigError, Settings
from gateway.runtime.model import ChatMessage, ModelRequest, ProviderError


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


async def run_doctor(settings: Settings) -> int:
    from gateway.personas import load_personas
    from gateway.runtime.providers import build_provider

    report = Report()
    print("config")
    report.ok(f"talon.yaml valid ({len(settings.channels)} channels, {len(settings.providers)} providers)")
    try:
        personas = load_personas(settings)
        report.ok(f"personas: {', '.join(personas) or '(none)'}")
    except ConfigError as exc:
        personas = {}
        for problem in exc.problems:
            report.fail(problem)
    for i, ch in enumerate(settings.channels):
        if ch.type == "telegram" and not ch.allowed_chats and not ch.allowed_users:
            report.warn(
                f"channels[{i}] ({ch.name}): anyone who finds this Telegram bot can talk to it; "
                "set allowed_users or allowed_chats"
            )

    from gateway.persona_mcp import doctor_findings

    findings = doctor_findings(personas.values())
    if findings:
        print("persona mcp servers")
    for level, text in findings:
        getattr(report, level)(text)

    print("data dir")
    data = settings.data_path
    try:
        data.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=data):
            pass
        mode = data.stat().st_mode & 0o777
        if mode & 0o077:
            report.warn(f"{data} is mode {mode:o}; `talon run` tightens it to 700")
        else:
            report.ok(f"{data} writable")
    except OSError as exc:
        report.fail(f"{data}: {exc}; fix permissions or change data_dir")

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
