"""``talon users``: make the password hash of a web-console user, list the configured users."""

from __future__ import annotations

import argparse
import getpass
import sys

from gateway.cli.common import CommandError, settings_for

__all__ = ["register"]


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "users",
        parents=[common],
        help="web-console users: make a password hash (add), list the configured ones",
        description="`add NAME --role admin|viewer` asks for a password (or reads one line from "
        "standard input with --password-stdin) and prints the console.users entry to paste into "
        "talon.yaml; nothing is written. `list` shows the users talon.yaml has.",
    )
    p.add_argument("action", choices=("add", "list"))
    p.add_argument("name", nargs="?", help="the user's sign-in name (add)")
    p.add_argument("--role", choices=("admin", "viewer"), default="viewer", help="default: viewer")
    p.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    p.set_defaults(handler=cmd_users, usage_error=p.error)


def cmd_users(args: argparse.Namespace) -> int:
    if args.action == "list":
        return _list(args)
    if not args.name:
        args.usage_error("add needs the user's NAME")
    from gateway.console_settings import ConsoleUser
    from gateway.http.console.passwords import hash_password

    password = _read_password(args.password_stdin)
    try:
        hashed = hash_password(password)
        user = ConsoleUser(name=args.name, role=args.role, password_hash=hashed)
    except ValueError as exc:
        raise CommandError(_first_error(exc)) from None
    print("# under console.users in talon.yaml:")
    print(f"- {{name: {user.name}, role: {user.role}, password_hash: '{user.password_hash}'}}")
    return 0


def _read_password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    if not sys.stdin.isatty():
        raise CommandError("no terminal to ask for the password; pipe it in with --password-stdin")
    first = getpass.getpass("password: ")
    if getpass.getpass("again: ") != first:
        raise CommandError("the two passwords differ; nothing printed")
    return first


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return str(exc)


def _list(args: argparse.Namespace) -> int:
    settings = settings_for(args)
    console = getattr(settings, "console", None)
    if console is None or not console.users:
        print("no console users (console.users in talon.yaml; `talon users add NAME` makes one)")
        return 0
    for user in console.users:
        print(f"{user.name:<24} {user.role}")
    return 0
