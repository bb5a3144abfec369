"""Checks a user would notice failing: markup a platform rejects or misreads."""

from __future__ import annotations

import re
from html.parser import HTMLParser

_ALLOWED = {
    "b",
    "strong",
    "i",
    "em",
    "u",
    "s",
    "strike",
    "del",
    "a",
    "code",
    "pre",
    "blockquote",
    "tg-spoiler",
}
_AMP = re.compile(r"&(?!(?:amp|lt|gt|quot);)")


class _TelegramChecker(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _ALLOWED:
            self.errors.append(f"tag <{tag}> not allowed")
        names = [name for name, _ in attrs]
        if tag == "a":
            if names != ["href"]:
                self.errors.append(f"<a> attributes {names}")
        elif tag == "code" and attrs:
            if (
                self.stack[-1:] != ["pre"]
                or names != ["class"]
                or not str(attrs[0][1]).startswith("language-")
            ):
                self.errors.append(f"<code {attrs}> outside <pre>")
        elif attrs:
            self.errors.append(f"<{tag}> has attributes {attrs}")
        if "code" in self.stack or ("pre" in self.stack and tag != "code"):
            self.errors.append(f"<{tag}> inside code")
        if tag == "pre" and self.stack and self.stack != ["blockquote"]:
            self.errors.append(f"<pre> inside {self.stack}")
        if tag == "code" and "a" in self.stack:
            self.errors.append("<code> inside a link")
        if tag == "blockquote" and "blockquote" in self.stack:
            self.errors.append("nested blockquote")
        if tag == "a" and "a" in self.stack:
            self.errors.append("nested link")
        self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.errors.append(f"self-closing <{tag}/>")

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
        else:
            self.stack.pop()

    def handle_entityref(self, name: str) -> None:
        if name not in ("amp", "lt", "gt", "quot"):
            self.errors.append(f"entity &{name};")

    def handle_charref(self, name: str) -> None:
        self.errors.append(f"char ref &#{name};")

    def handle_comment(self, data: str) -> None:
        self.errors.append("comment")

    def handle_decl(self, decl: str) -> None:
        self.errors.append("declaration")


def telegram_html_errors(text: str) -> list[str]:
    """Why Telegram would reject ``text`` with parse_mode=HTML (empty when it is fine)."""
    checker = _TelegramChecker()
    checker.feed(text)
    checker.close()
    errors = checker.errors
    if checker.stack:
        errors.append(f"unclosed {checker.stack}")
    if _AMP.search(text):
        errors.append("bare &")
    return errors


def telegram_visible_text(text: str) -> str:
    """What Telegram shows for an HTML message: tags removed, entities decoded."""
    text = re.sub(r"<[^>]*>", "", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")


def _strip_containers(line: str) -> str:
    while True:
        stripped = line.lstrip(" ")
        if stripped.startswith(">"):
            line = stripped[1:]
            continue
        match = re.match(r"(?:[-*+]|\d{1,9}[.)])(?: |$)", stripped)
        if match:
            line = stripped[match.end() :]
            continue
        return stripped


def unbalanced_fence(text: str) -> str | None:
    """The line that opens a code fence never closed in ``text`` (None when all close)."""
    open_len = 0
    opened = ""
    for line in text.split("\n"):
        body = _strip_containers(line)
        run = len(body) - len(body.lstrip("`"))
        if not open_len:
            if run >= 3 and "`" not in body[run:]:
                open_len, opened = run, line
        elif run >= open_len and not body[run:].strip():
            open_len = 0
    return opened if open_len else None


_SLACK_LINK = re.compile(r"<(?:https?://|mailto:)[^<>|\s]+(?:\|[^<>]*)?>")
# the quote marker: at the start of a line, after any list indentation and markers
_SLACK_QUOTE = re.compile(r"^((?:\s*(?:[\u2022\u25e6\u25aa]|\d+\.)\s)*\s*)>", re.MULTILINE)


def slack_errors(text: str) -> list[str]:
    """Mentions or broken escaping a Slack message must never contain."""
    errors = []
    rest = _SLACK_QUOTE.sub(r"\1", _SLACK_LINK.sub("", text))
    if "<" in rest or ">" in rest:
        errors.append("a '<' or '>' outside a link")
    if re.search(r"&(?!(?:amp|lt|gt);)", text):
        errors.append("bare &")
    for bad in ("<!", "<@", "<#"):
        if bad in text:
            errors.append(f"{bad} in output")
    return errors
