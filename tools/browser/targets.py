"""``target`` arguments of browser_act and browser_screenshot, turned into Playwright locators.

Three kinds: ``semantic`` (``text`` and optionally ``role``: what a user sees), ``element_id``
(an ``el_`` id of the latest observation) and ``selector`` (CSS, or ``xpath=...``).
"""

from __future__ import annotations

import re
from typing import Any

from tools.base import ToolError
from tools.browser.observe import first_line
from tools.browser.session import BrowserSession

__all__ = ["TARGET_SCHEMA", "locate"]

ELEMENT_ID = re.compile(r"^el_[0-9a-f]{6}$")
MAX_TEXT = 500
MAX_SELECTOR = 2_000
_KINDS = ("semantic", "element_id", "selector")
_EXAMPLES = (
    '{"kind": "semantic", "text": "Sign in", "role": "button"}, '
    '{"kind": "element_id", "element_id": "el_1a2b3c"} or {"kind": "selector", "selector": "#email"}'
)

TARGET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "What to act on. semantic: {kind, text, role?} matches what a user sees (prefer it); "
        "element_id: {kind, element_id} from the latest observation (el_ plus 6 hex characters); "
        "selector: {kind, selector} in CSS or xpath=..."
    ),
    "properties": {
        "kind": {"type": "string", "enum": list(_KINDS)},
        "text": {"type": "string", "maxLength": MAX_TEXT},
        "role": {"type": "string", "maxLength": 40},
        "element_id": {"type": "string", "maxLength": 20},
        "selector": {"type": "string", "maxLength": MAX_SELECTOR},
    },
    "required": ["kind"],
}


def _text(target: dict[str, Any], key: str) -> str:
    value = target.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"a {target.get('kind')} target needs {key} as a non-empty string; e.g. {_EXAMPLES}")
    return value.strip()


async def locate(session: BrowserSession, target: Any) -> tuple[Any, str]:
    """A locator of exactly one element for ``target`` on the current page, and how it was named.

    Raises:
        :class:`ToolError`: The target is malformed, or matches nothing on the page.
    """
    page = session.require_page()
    if not isinstance(target, dict) or target.get("kind") not in _KINDS:
        raise ToolError(f"target must be an object with kind semantic, element_id or selector: {_EXAMPLES}")
    kind = target["kind"]
    if kind == "element_id":
        element_id = _text(target, "element_id")
        if not ELEMENT_ID.match(element_id):
            raise ToolError(
                f"element_id {element_id[:30]!r} is not an id of an observation: they are el_ and six "
                "hex characters, as browser_observe lists them"
            )
        locator = page.locator(f'[{session.marker}="{element_id}"]')
        shown = element_id
        missing = (
            f"element {element_id} is not on the page (it changed, or the id is from an older "
            "observation); call browser_observe and use an id from its elements"
        )
    elif kind == "semantic":
        text = _text(target, "text")
        role = target.get("role")
        if role is not None and (not isinstance(role, str) or not role.strip()):
            raise ToolError("role must be an ARIA role such as button, link, textbox or checkbox")
        if role:
            locator = page.get_by_role(role.strip().lower(), name=text)
        else:
            locator = page.get_by_label(text).or_(page.get_by_placeholder(text)).or_(page.get_by_text(text))
        shown = f"{role.strip().lower()} {text!r}" if role else repr(text)
        missing = (
            f"nothing on the page matches {shown}; call browser_observe to see the elements' roles "
            "and names, or use an element_id target"
        )
    else:
        selector = _text(target, "selector")
        locator = page.locator(selector)
        shown = f"selector {selector[:100]!r}"
        missing = f"nothing on the page matches {shown}; call browser_observe to see what is there"
    try:
        count = await locator.count()
    except Exception as exc:
        raise ToolError(f"{shown} is not a usable target: {first_line(exc)}") from None
    if count == 0:
        raise ToolError(missing)
    return locator.first, shown
