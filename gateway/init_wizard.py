"""``talon init`` in a terminal: ask for a provider and channels, checking each answer live.

Every answer also has a flag (gateway/cli/init.py), so scripts never meet a prompt. The
platform checks are the calls each platform offers for "who am I" (Telegram ``getMe``, Slack
``auth.test``, Discord ``users/@me``); their roots can be pointed elsewhere (a self-hosted Bot
API server, or the test fakes).
"""

from __future__ import annotations

import getpass
import json
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.scaffold import CHANNEL_TYPES, InitAnswers

__all__ = ["ApiRoots", "CheckResult", "ask", "check_model_server", "check_token"]

TIMEOUT = 10.0
DEFAULT_OLLAMA = "http://127.0.0.1:11434/v1"
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-6"


@dataclass(frozen=True)
class ApiRoots:
    """Where the token checks go."""

    telegram: str = "https://api.telegram.org"
    slack: str = "https://slack.com"
    discord: str = "https://discord.com"


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    detail: str  # the bot's name when ok, else why not
    models: list[str] = field(default_factory=list)


def _get(url: str, headers: dict[str, str] | None = None, data: bytes | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, body = exc.code, exc.read()
    try:
        return status, json.loads(body or b"null")
    except ValueError:
        return status, None


def _request(url: str, **kwargs: Any) -> tuple[int, Any] | str:
    """(status, JSON) or, when nothing answered, why."""
    if not url.startswith(("http://", "https://")):
        return f"{url} is not an http(s) URL"
    try:
        return _get(url, **kwargs)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"cannot reach {url}: {reason}"


def check_model_server(base_url: str, api_key: str = "none") -> CheckResult:
    """An OpenAI-compatible server answers at ``base_url`` (its models, when it lists them)."""
    answer = _request(f"{base_url.rstrip('/')}/models", headers={"Authorization": f"Bearer {api_key}"})
    if isinstance(answer, str):
        return CheckResult(False, answer)
    status, body = answer
    models = []
    if isinstance(body, dict) and isinstance(body.get("data"), list):
        models = [str(m.get("id")) for m in body["data"] if isinstance(m, dict) and m.get("id")]
    return CheckResult(True, f"answered (HTTP {status})", models)


def check_token(platform: str, token: str, roots: ApiRoots) -> CheckResult:
    """Ask the platform who ``token`` belongs to."""
    if platform == "telegram":
        answer = _request(f"{roots.telegram.rstrip('/')}/bot{token}/getMe")
        if isinstance(answer, str):
            return CheckResult(False, answer)
        status, body = answer
        if status == 200 and isinstance(body, dict) and body.get("ok"):
            return CheckResult(True, "@" + str(body["result"].get("username")))
        return CheckResult(
            False, f"Telegram refused the token (HTTP {status}); copy it again from @BotFather"
        )
    if platform == "slack":
        answer = _request(
            f"{roots.slack.rstrip('/')}/api/auth.test", headers={"Authorization": f"Bearer {token}"}, data=b""
        )
        if isinstance(answer, str):
            return CheckResult(False, answer)
        _, body = answer
        if isinstance(body, dict) and body.get("ok"):
            return CheckResult(True, f"{body.get('user')} in {body.get('team')}")
        error = body.get("error") if isinstance(body, dict) else "no answer"
        return CheckResult(False, f"Slack refused the bot token ({error}); use the xoxb- token of the app")
    answer = _request(
        f"{roots.discord.rstrip('/')}/api/v10/users/@me", headers={"Authorization": f"Bot {token}"}
    )
    if isinstance(answer, str):
        return CheckResult(False, answer)
    status, body = answer
    if status == 200 and isinstance(body, dict) and body.get("username"):
        return CheckResult(True, str(body["username"]))
    return CheckResult(
        False, f"Discord refused the token (HTTP {status}); reset it under Bot in the developer portal"
    )


# ---------------------------------------------------------------- the questions

TOKENS = {
    "telegram": [("TELEGRAM_BOT_TOKEN", "Telegram bot token (from @BotFather)")],
    "slack": [
        ("SLACK_BOT_TOKEN", "Slack bot token (xoxb-...)"),
        ("SLACK_APP_TOKEN", "Slack app-level token for Socket Mode (xapp-...)"),
    ],
    "discord": [("DISCORD_BOT_TOKEN", "Discord bot token")],
}


class Asker:
    """Prompts on the terminal; every question has a default, so Enter moves on."""

    def __init__(self, read: Callable[[str], str] = input, secret: Callable[[str], str] = getpass.getpass):
        self.read = read
        self.secret = secret

    def text(self, question: str, default: str = "") -> str:
        shown = f" [{default}]" if default else ""
        return self.read(f"{question}{shown}: ").strip() or default

    def yes(self, question: str, default: bool = False) -> bool:
        answer = self.read(f"{question} [{'Y/n' if default else 'y/N'}]: ").strip().lower()
        return default if not answer else answer.startswith("y")

    def choice(self, question: str, options: list[str], default: int = 1) -> int:
        for i, option in enumerate(options, 1):
            print(f"  {i}) {option}")
        while True:
            answer = self.text(question, str(default))
            if answer.isdigit() and 1 <= int(answer) <= len(options):
                return int(answer)
            print(f"  answer 1 to {len(options)}")


def ask(existing: dict[str, str], roots: ApiRoots, asker: Asker | None = None) -> InitAnswers:
    """Ask for what ``existing`` (the folder's .env) does not hold yet."""
    asker = asker or Asker()
    env: dict[str, str] = {}
    channels: list[str] = []
    if "TALON_MODEL" in existing:
        print(f"model: keeping {existing['TALON_MODEL']} from .env")
    else:
        env.update(_ask_provider(asker))
    for platform in CHANNEL_TYPES:
        if all(key in existing for key, _ in TOKENS[platform]):
            print(f"{platform}: keeping the token in .env")
            continue
        if not asker.yes(f"Add a {platform.capitalize()} bot?"):
            continue
        values = _ask_tokens(platform, asker, roots)
        if values:
            env.update(values)
            channels.append(platform)
    return InitAnswers(env=env, channels=channels)


def _ask_provider(asker: Asker) -> dict[str, str]:
    print("Which model provider?")
    pick = asker.choice(
        "provider", ["Anthropic (API key)", "an OpenAI-compatible server (Ollama, vLLM, ...)"]
    )
    if pick == 1:
        key = asker.secret("Anthropic API key (empty: add it to .env later): ").strip()
        model = asker.text("model", DEFAULT_ANTHROPIC_MODEL)
        return {"TALON_MODEL": f"anthropic:{model}", "ANTHROPIC_API_KEY": key}
    while True:
        base_url = asker.text("base URL", DEFAULT_OLLAMA)
        result = check_model_server(base_url)
        print(f"  {base_url}: {result.detail}")
        if result.ok or asker.yes("Keep it anyway?"):
            break
    model = asker.text("model name", result.models[0] if result.models else "llama3.2")
    return {"TALON_MODEL": f"local:{model}", "OPENAI_BASE_URL": base_url}


def _ask_tokens(platform: str, asker: Asker, roots: ApiRoots) -> dict[str, str]:
    values: dict[str, str] = {}
    for key, question in TOKENS[platform]:
        while True:
            token = asker.secret(f"{question} (empty: skip {platform}): ").strip()
            if not token:
                return {}
            if key == "SLACK_APP_TOKEN":
                if token.startswith("xapp-"):
                    break
                print("  an app-level token starts with xapp- (Basic Information -> App-Level Tokens)")
                continue
            result = check_token(platform, token, roots)
            print(f"  {'ok: ' if result.ok else ''}{result.detail}")
            if result.ok:
                break
        values[key] = token
    return values
