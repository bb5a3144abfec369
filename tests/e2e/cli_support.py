"""What the command-line tests share: a fresh ``talon init`` folder and a listing of a tree."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.daemon import talon


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


async def init_bot(tmp_path: Path, env_lines: list[str] = ("TALON_MODEL=local:x",)) -> Path:  # type: ignore[assignment]
    """``talon init`` into ``tmp_path/mybot``, with ``env_lines`` as its ``.env``."""
    bot = tmp_path / "mybot"
    code, _, err = await talon("init", str(bot))
    assert code == 0, err
    (bot / ".env").write_text("\n".join(env_lines) + "\n")
    return bot
