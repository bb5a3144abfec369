"""``console:`` in talon.yaml: the operators who may sign in to the web console, and how long
their sessions last. The console is served by the HTTP server (``http:``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from gateway.model_types import StrictModel

__all__ = ["ConsoleSettings", "ConsoleUser", "Role"]

Role = Literal["admin", "viewer"]


class ConsoleUser(StrictModel):
    name: str = Field(
        pattern=r"^[A-Za-z0-9_.@-]{1,64}$", description="the sign-in name (letters, digits, _ . @ -)"
    )
    role: Role = Field(
        description="admin (may change things: retry, drop, pause, run) or viewer (reads only)"
    )
    password_hash: str = Field(
        description="an argon2 hash made by `talon users add NAME` (never the password itself)"
    )

    @field_validator("password_hash")
    @classmethod
    def _argon2(cls, value: str) -> str:
        if not value.startswith("$argon2"):
            raise ValueError(
                "must be an argon2 hash ($argon2id$...); make one with `talon users add NAME --role ROLE` "
                "and paste what it prints"
            )
        return value


class ConsoleSettings(StrictModel):
    users: list[ConsoleUser] = Field([], description="who may sign in; empty = nobody can")
    session_idle_minutes: float = Field(
        30.0, gt=0, le=24 * 60, description="a session unused this long ends (sign in again)"
    )
    session_max_hours: float = Field(
        12.0, gt=0, le=24 * 30, description="a session ends this long after sign-in, however busy"
    )
    login_attempts: int = Field(
        5, ge=1, le=100, description="failed sign-ins per user and address before they wait"
    )
    login_window_minutes: float = Field(
        15.0, gt=0, le=24 * 60, description="the window failed sign-ins are counted in"
    )

    @model_validator(mode="after")
    def _unique_names(self) -> ConsoleSettings:
        seen: set[str] = set()
        for user in self.users:
            if user.name.lower() in seen:
                raise ValueError(f"users: {user.name!r} is listed twice; keep one entry per user")
            seen.add(user.name.lower())
        return self

    def user(self, name: str) -> ConsoleUser | None:
        """The user signing in as ``name`` (names compare case-insensitively)."""
        wanted = name.lower()
        return next((u for u in self.users if u.name.lower() == wanted), None)
