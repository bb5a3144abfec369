"""Telegram's text rules, as the Bot API server applies them.

:func:`parse_html` follows the server's HTML parser (tdlib ``parse_html``): only the
documented tags, balanced, with the same error texts; ``&`` that does not start a known
entity stays literal. :func:`auto_entities` finds the mentions and bot commands Telegram
marks in incoming messages. Offsets and lengths are UTF-16 code units, like the API's.
"""

from __future__ import annotations

import re
from typing import Any

SUPPORTED_TAGS = frozenset(
    {
        "a", "b", "strong", "i", "em", "s", "strike", "del", "u", "ins",
        "tg-spoiler", "tg-emoji", "span", "pre", "code", "blockquote",
    }
)  # fmt: skip
_ENTITY_TYPES = {
    "b": "bold", "strong": "bold", "i": "italic", "em": "italic",
    "s": "strikethrough", "strike": "strikethrough", "del": "strikethrough",
    "u": "underline", "ins": "underline", "tg-spoiler": "spoiler", "span": "spoiler",
    "code": "code", "pre": "pre", "blockquote": "blockquote", "a": "text_link",
    "tg-emoji": "custom_emoji",
}  # fmt: skip
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_NUMERIC = re.compile(r"&#(?:x([0-9a-fA-F]{1,6})|([0-9]{1,7}));")
_NAMED_RE = re.compile(r"&([a-zA-Z]{2,4});")
_MENTION = re.compile(r"(?<![\w@])@([A-Za-z][A-Za-z0-9_]{3,31})(?!\w)")
_COMMAND = re.compile(r"(?<![\w/])/[A-Za-z0-9_]{1,32}(?:@[A-Za-z][A-Za-z0-9_]{3,31})?(?![\w@/])")


class HtmlParseError(ValueError):
    """The text is not HTML the Bot API accepts; the message is the server's wording."""


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit of every Telegram limit and offset."""
    return len(text.encode("utf-16-le")) // 2


def _byte_offset(text: str, index: int) -> int:
    return len(text[:index].encode("utf-8"))


def _decode_entity(text: str, i: int) -> tuple[str, int] | None:
    """The character an HTML entity at ``text[i]`` stands for, and the index after it."""
    m = _NUMERIC.match(text, i)
    if m:
        code = int(m.group(1), 16) if m.group(1) else int(m.group(2))
        if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF:
            return chr(code), m.end()
        return None
    m = _NAMED_RE.match(text, i)
    if m and m.group(1) in _NAMED:
        return _NAMED[m.group(1)], m.end()
    return None


def parse_html(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Parse ``parse_mode=HTML`` text into (visible text, entities).

    Raises:
        HtmlParseError: with the server's description, e.g.
            ``Unsupported start tag "br" at byte offset 12``.
    """
    out: list[str] = []
    offset = 0  # UTF-16 offset of the visible text so far
    stack: list[dict[str, Any]] = []
    entities: list[dict[str, Any]] = []
    n = len(text)
    i = 0
    while i < n:
        c = text[i]
        if c == "&":
            decoded = _decode_entity(text, i)
            if decoded:
                out.append(decoded[0])
                offset += utf16_len(decoded[0])
                i = decoded[1]
                continue
        if c != "<":
            out.append(c)
            offset += utf16_len(c)
            i += 1
            continue
        begin = i
        i += 1
        if i < n and text[i] == "/":
            if not stack:
                raise HtmlParseError(f"Unexpected end tag at byte offset {_byte_offset(text, begin)}")
            j = i + 1
            while j < n and not text[j].isspace() and text[j] != ">":
                j += 1
            end_name = text[i + 1 : j].lower()
            while j < n and text[j].isspace():
                j += 1
            if j >= n or text[j] != ">":
                raise HtmlParseError(f"Unclosed end tag at byte offset {_byte_offset(text, begin)}")
            top = stack.pop()
            if end_name and end_name != top["tag"]:
                raise HtmlParseError(
                    f"Unmatched end tag at byte offset {_byte_offset(text, begin)}, "
                    f'expected "</{top["tag"]}>", found "</{end_name}>"'
                )
            length = offset - top["offset"]
            if length > 0:
                entities.append(_entity(top, length))
            i = j + 1
            continue
        j = i
        while j < n and not text[j].isspace() and text[j] != ">":
            j += 1
        if j >= n:
            raise HtmlParseError(f"Unclosed start tag at byte offset {_byte_offset(text, begin)}")
        tag = text[i:j].lower()
        if tag not in SUPPORTED_TAGS:
            raise HtmlParseError(f'Unsupported start tag "{tag}" at byte offset {_byte_offset(text, begin)}')
        attrs, j = _attributes(text, j, tag, begin)
        if tag == "span" and attrs.get("class") != "tg-spoiler":
            raise HtmlParseError(
                f'Tag "span" must have class "tg-spoiler" at byte offset {_byte_offset(text, begin)}'
            )
        stack.append({"tag": tag, "attrs": attrs, "offset": offset})
        i = j + 1
    if stack:
        raise HtmlParseError(f'Can\'t find end tag corresponding to start tag "{stack[-1]["tag"]}"')
    entities.sort(key=lambda e: (e["offset"], -e["length"]))
    return "".join(out), entities


def _attributes(text: str, j: int, tag: str, begin: int) -> tuple[dict[str, str], int]:
    """Read ``name=value`` pairs up to the closing ``>``; returns them and the ``>`` index."""
    n = len(text)
    attrs: dict[str, str] = {}
    where = _byte_offset(text, begin)
    while True:
        while j < n and text[j].isspace():
            j += 1
        if j >= n:
            raise HtmlParseError(f"Unclosed start tag at byte offset {where}")
        if text[j] == ">":
            return attrs, j
        k = j
        while k < n and not text[k].isspace() and text[k] not in "=>":
            k += 1
        name = text[j:k].lower()
        if not name:
            raise HtmlParseError(f'Empty attribute name in the tag "{tag}" at byte offset {where}')
        while k < n and text[k].isspace():
            k += 1
        if k >= n or text[k] != "=":
            raise HtmlParseError(
                f'Expected equal sign in declaration of an attribute of the tag "{tag}" at byte offset {where}'
            )
        k += 1
        while k < n and text[k].isspace():
            k += 1
        if k >= n:
            raise HtmlParseError(f'Unclosed start tag "{tag}" at byte offset {where}')
        if text[k] in "'\"":
            quote = text[k]
            end = text.find(quote, k + 1)
            if end < 0:
                raise HtmlParseError(f"Unclosed start tag at byte offset {where}")
            value = _unescape(text[k + 1 : end])
            j = end + 1
        else:
            m = re.compile(r"[A-Za-z0-9.\-]*").match(text, k)
            assert m is not None
            value = m.group(0).lower()
            j = m.end()
            if j < n and not text[j].isspace() and text[j] != ">":
                raise HtmlParseError(f"Unexpected end of name token at byte offset {_byte_offset(text, k)}")
        attrs[name] = value


def _unescape(value: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(value):
        decoded = _decode_entity(value, i) if value[i] == "&" else None
        if decoded:
            out.append(decoded[0])
            i = decoded[1]
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def _entity(open_tag: dict[str, Any], length: int) -> dict[str, Any]:
    tag, attrs = open_tag["tag"], open_tag["attrs"]
    entity: dict[str, Any] = {"type": _ENTITY_TYPES[tag], "offset": open_tag["offset"], "length": length}
    if tag == "a":
        entity["url"] = attrs.get("href", "")
    elif tag == "code" and attrs.get("class", "").startswith("language-"):
        entity["language"] = attrs["class"].removeprefix("language-")
    elif tag == "blockquote" and "expandable" in attrs:
        entity["type"] = "expandable_blockquote"
    return entity


def auto_entities(text: str) -> list[dict[str, Any]]:
    """The ``mention`` and ``bot_command`` entities Telegram adds to an incoming text."""
    found: list[dict[str, Any]] = []
    for kind, pattern in (("mention", _MENTION), ("bot_command", _COMMAND)):
        for m in pattern.finditer(text):
            found.append(
                {"type": kind, "offset": utf16_len(text[: m.start()]), "length": utf16_len(m.group(0))}
            )
    return sorted(found, key=lambda e: e["offset"])
