"""``talon init DIR``: a working config folder, from flags or by asking in a terminal."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gateway.cli.common import CommandError

__all__ = ["register"]

# flag dest -> the .env key it fills
_ENV_FLAGS = {
    "anthropic_key": "ANTHROPIC_API_KEY",
    "openai_base_url": "OPENAI_BASE_URL",
    "openai_key": "OPENAI_API_KEY",
    "model": "TALON_MODEL",
    "telegram_token": "TELEGRAM_BOT_TOKEN",
    "slack_bot_token": "SLACK_BOT_TOKEN",
    "slack_app_token": "SLACK_APP_TOKEN",
    "discord_token": "DISCORD_BOT_TOKEN",
}
_CHANNEL_FLAGS = {
    "telegram": ("telegram_token",),
    "slack": ("slack_bot_token", "slack_app_token"),
    "discord": ("discord_token",),
}


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "init",
        parents=[common],
        help="create a working config in DIR (asks in a terminal; flags for scripts)",
        description="Writes DIR/talon.yaml, personas/assistant/, .env (mode 600), .env.example and "
        ".gitignore. In a terminal, without answer flags, it asks for a provider and channels and checks "
        "them live. Run again, it keeps what is there and adds what is new; --force overwrites.",
    )
    p.add_argument("dir", type=Path, help="directory to create or complete")
    p.add_argument("--force", action="store_true", help="overwrite existing files and .env values")
    p.add_argument(
        "--data-dir",
        metavar="PATH",
        help="data_dir written into talon.yaml (default: data, inside DIR); e.g. /data in a container",
    )
    p.add_argument("--no-input", action="store_true", help="never ask, even in a terminal")
    answers = p.add_argument_group("answers (each skips its question)")
    answers.add_argument(
        "--model", metavar="PROVIDER:MODEL", help="e.g. anthropic:claude-sonnet-4-6 or local:llama3.2"
    )
    answers.add_argument("--anthropic-key", metavar="KEY", help="ANTHROPIC_API_KEY")
    answers.add_argument(
        "--openai-base-url", metavar="URL", help="an OpenAI-compatible server, e.g. Ollama's"
    )
    answers.add_argument("--openai-key", metavar="KEY", help="its API key (default: none)")
    answers.add_argument(
        "--telegram-token", metavar="TOKEN", help="adds a Telegram channel bound to assistant"
    )
    answers.add_argument(
        "--slack-bot-token", metavar="TOKEN", help="with --slack-app-token: adds a Slack channel"
    )
    answers.add_argument("--slack-app-token", metavar="TOKEN", help="the xapp- token for Socket Mode")
    answers.add_argument("--discord-token", metavar="TOKEN", help="adds a Discord channel bound to assistant")
    checks = p.add_argument_group("where the live checks go (self-hosted servers)")
    checks.add_argument("--telegram-api-url", metavar="URL", default="https://api.telegram.org")
    checks.add_argument("--slack-api-url", metavar="URL", default="https://slack.com")
    checks.add_argument("--discord-api-url", metavar="URL", default="https://discord.com")
    p.set_defaults(handler=cmd_init)


def cmd_init(args: argparse.Namespace) -> int:
    from gateway.init_wizard import ApiRoots, ask
    from gateway.scaffold import InitAnswers, read_env, write_scaffold

    given = {key: getattr(args, dest) for dest, key in _ENV_FLAGS.items() if getattr(args, dest) is not None}
    channels = [name for name, dests in _CHANNEL_FLAGS.items() if all(getattr(args, d) for d in dests)]
    if bool(args.slack_bot_token) != bool(args.slack_app_token):
        raise CommandError("a Slack channel needs both --slack-bot-token and --slack-app-token", 2)
    if args.openai_base_url and args.model is None:
        given["TALON_MODEL"] = "local:llama3.2"
    interactive = not given and not args.no_input and sys.stdin.isatty()
    if interactive:
        roots = ApiRoots(args.telegram_api_url, args.slack_api_url, args.discord_api_url)
        answers = ask({} if args.force else read_env(args.dir), roots)
    else:
        answers = InitAnswers(env=given, channels=channels)
    done = write_scaffold(args.dir, force=args.force, data_dir=args.data_dir, answers=answers)
    for path in done.written:
        print(f"wrote {path}")
    for path in done.kept:
        print(f"kept  {path}")
    for note in done.notes:
        print(f"note: {note}")
    config = args.dir / "talon.yaml"
    env = read_env(args.dir)
    if not env.get("ANTHROPIC_API_KEY") and env.get("TALON_MODEL", "anthropic:").startswith("anthropic:"):
        print(
            f"\nNext: add your ANTHROPIC_API_KEY (or an OPENAI_BASE_URL and TALON_MODEL) to {args.dir}/.env, then"
        )
    else:
        print("\nNext:")
    print(f"  talon doctor -c {config}\n  talon run -c {config}\n  talon chat -c {config}")
    return 0
