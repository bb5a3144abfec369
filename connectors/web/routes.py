"""The web chat's HTTP routes, under ``/chat/<channel>/``.

- ``GET /`` the chat page, ``GET /chat.js`` and ``/chat.css`` the client (also the widget).
- ``POST /api/hello``: who is chatting. A user signed in to the web console (same origin)
  gets their name and the CSRF token their posts carry; a site's page (site token + origin)
  gets the visitor's signed cookie, made on first visit.
- ``POST /api/messages`` (signed in + CSRF token, or token + origin + cookie): a message,
  JSON or multipart with files. The page's ``event_id`` keys it: a retried post is not stored
  twice. The answer comes only after the message is committed.
- ``GET /api/events`` (signed in, or the cookie): an event stream of the chat's changes,
  resuming after ``Last-Event-ID`` (or ``?after=``), so a reconnect loses and doubles nothing.
- ``GET /api/files/<id>`` (signed in, or the cookie): a file a reply carried, to the one whose
  chat it is.

A request from another origin that no site lists is refused before anything is read or
stored. A console session counts only on requests from Talon's own origin (or with none, as
a same-origin ``GET``): a listed site's page cannot chat as the operator signed in beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import quote

from aiohttp import BodyPartReader, web

from connectors.base import Attachment, Sender
from connectors.web.access import user_chat
from gateway.errors import TransientError
from gateway.http.console.auth import CONSOLE_AUTH
from gateway.inbound_files import inbox_name
from gateway.store.web_chat import WebMessage

if TYPE_CHECKING:
    from connectors.base import IntakeResult
    from connectors.web.access import SiteAccess, Visitors
    from gateway.config import WebChannel


class WebChat(Protocol):
    """What the routes use of the channel (:class:`connectors.web.connector.WebConnector`)."""

    name: str
    settings: WebChannel
    sites: SiteAccess
    files_dir: Path
    secure_cookie: bool
    public_origin: str | None

    @property
    def visitors(self) -> Visitors: ...

    async def submit(
        self,
        visitor: str,
        event_id: str,
        text: str,
        attachments: tuple[Attachment, ...] = (),
        *,
        sender: Sender | None = None,
    ) -> IntakeResult: ...

    async def changes(self, visitor: str, after: int, limit: int) -> list[WebMessage]: ...

    async def message(self, message_id: int) -> WebMessage | None: ...

    def open_stream(self, visitor: str, queue: asyncio.Queue[dict[str, Any]]) -> bool: ...

    def close_stream(self, visitor: str, queue: asyncio.Queue[dict[str, Any]]) -> None: ...

    def end_streams(self) -> None: ...


__all__ = ["COOKIE", "WebChat", "install_routes", "message_json"]

log = logging.getLogger("talon.connectors.web")

COOKIE = "talon_visitor"
BATCH = 200  # changes read at a time; a fresh page gets the latest this many
HEARTBEAT = 15.0  # seconds between keep-alive comments on an idle stream
MAX_TEXT = 200_000  # characters of one posted message (longer text is cut by intake at the channel's limit)
_EVENT_ID = re.compile(r"^[A-Za-z0-9_-]{8,80}$")
_READ = 64 * 1024


class _Refused(Exception):
    """A refusal the route answers with: ``status``, the sentence, and (nobody signed in on
    Talon's own page) where to sign in."""

    def __init__(self, status: int, message: str, *, sign_in: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.sign_in = sign_in

    def response(self) -> web.Response:
        body = {"error": str(self)} if self.sign_in is None else {"error": str(self), "sign_in": self.sign_in}
        return web.json_response(body, status=self.status)


def install_routes(app: web.Application, c: WebChat) -> None:
    base = f"/chat/{c.name}"
    routes = app.router
    routes.add_get(base, partial(_redirect, base + "/"))
    routes.add_get(base + "/", partial(_static, "page.html", "text/html"))
    routes.add_get(base + "/chat.js", partial(_static, "chat.js", "text/javascript"))
    routes.add_get(base + "/chat.css", partial(_static, "chat.css", "text/css"))
    routes.add_route("OPTIONS", base + "/api/{tail:.*}", partial(_preflight, c))
    routes.add_post(base + "/api/hello", partial(_guarded, c, _hello))
    routes.add_post(base + "/api/messages", partial(_guarded, c, _messages))
    routes.add_get(base + "/api/events", partial(_guarded, c, _events))
    routes.add_get(base + "/api/files/{id}", partial(_guarded, c, _file))

    async def _closing(app: web.Application) -> None:
        c.end_streams()

    app.on_shutdown.append(_closing)


async def _redirect(location: str, request: web.Request) -> web.StreamResponse:
    raise web.HTTPFound(location)


async def _static(name: str, content_type: str, request: web.Request) -> web.Response:
    body = resources.files("connectors.web").joinpath("static", name).read_bytes()
    return web.Response(
        body=body, content_type=content_type, charset="utf-8", headers={"Cache-Control": "no-cache"}
    )


# ---------------------------------------------------------------- access


def _cors(c: WebChat, request: web.Request, response: web.StreamResponse) -> None:
    origin = request.headers.get("Origin")
    if origin is not None and c.sites.origin_allowed(origin):
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Access-Control-Allow-Credentials"] = "true"
        response.headers["Vary"] = "Origin"


async def _preflight(c: WebChat, request: web.Request) -> web.Response:
    origin = request.headers.get("Origin")
    if origin is None or not c.sites.origin_allowed(origin):
        return _error(403, "this origin may not use the chat")
    response = web.Response(status=204)
    _cors(c, request, response)
    response.headers["Access-Control-Allow-Methods"] = "GET, POST"
    response.headers["Access-Control-Allow-Headers"] = "Content-Type, X-Talon-Site"
    response.headers["Access-Control-Max-Age"] = "600"
    return response


def _same_origin(c: WebChat, request: web.Request) -> bool:
    """Whether the request comes from Talon's own pages (no ``Origin``: a same-origin ``GET``)."""
    origin = request.headers.get("Origin")
    if origin is None:
        return True
    own = {f"{request.scheme}://{request.host}".lower(), c.public_origin}
    return origin.lower() in own


async def _guarded(c: WebChat, handler: Any, request: web.Request) -> web.StreamResponse:
    """The origin check for every API route; refusals as JSON, with CORS headers when allowed."""
    try:
        if not (_same_origin(c, request) or c.sites.origin_allowed(request.headers.get("Origin"))):
            raise _Refused(403, "this origin may not use the chat")
        response: web.StreamResponse = await handler(c, request)
    except _Refused as exc:
        response = exc.response()
    if not response.prepared:
        _cors(c, request, response)
    return response


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _site(c: WebChat, request: web.Request) -> None:
    if not c.sites.site_for(request.headers.get("X-Talon-Site"), request.headers.get("Origin")):
        raise _Refused(403, "unknown site token for this origin")


@dataclass(frozen=True, slots=True)
class _Who:
    """Who is chatting: the chat (its id) and the sender of what they post."""

    chat: str
    sender: Sender
    csrf: str | None = None  # a signed-in user's, which their posts must carry
    alive: Callable[[], bool] = lambda: True  # False once a signed-in user's session ended


def _signed_in(c: WebChat, request: web.Request) -> _Who | None:
    """The console user signed in on Talon's own page, or None."""
    auth = request.app.get(CONSOLE_AUTH)
    if auth is None or not c.settings.console_users or not _same_origin(c, request):
        return None
    session = auth.session_of(request)
    if session is None:
        return None
    sender = Sender(id=session.user, display_name=session.user)
    return _Who(user_chat(session.user), sender, session.csrf, partial(auth.sessions.alive, session))


def _who(c: WebChat, request: web.Request, *, posting: bool = False) -> _Who:
    """The signed-in user (a post must carry their CSRF token), else the cookie's visitor
    (a post must carry a site's token too)."""
    user = _signed_in(c, request)
    if user is not None:
        sent = request.headers.get("X-CSRF-Token") or ""
        if posting and not (user.csrf and hmac.compare_digest(user.csrf.encode(), sent.encode())):
            raise _Refused(403, "this page expired or did not come from Talon; reload it")
        return user
    if posting and not request.headers.get("X-Talon-Site") and _same_origin(c, request):
        raise _sign_in_refusal(c, request)
    if posting:
        _site(c, request)
    visitor = c.visitors.visitor_of(request.cookies.get(COOKIE))
    if visitor is None:
        raise _Refused(401, "no chat yet: open it with /api/hello")
    return _Who(visitor, Sender(id=visitor, display_name="visitor"))


# ---------------------------------------------------------------- hello


async def _hello(c: WebChat, request: web.Request) -> web.Response:
    limits = {
        "max_files": c.settings.max_files_per_message,
        "max_file_bytes": c.settings.max_attachment_bytes,
    }
    user = _signed_in(c, request)
    if user is not None:
        return web.json_response({**limits, "user": user.sender.display_name, "csrf": user.csrf})
    if not request.headers.get("X-Talon-Site") and _same_origin(c, request):
        raise _sign_in_refusal(c, request)
    _site(c, request)
    visitor = c.visitors.visitor_of(request.cookies.get(COOKIE))
    response = web.json_response(limits)
    if visitor is None:
        visitor, value = c.visitors.new()
    else:
        value = c.visitors.cookie(visitor)
    # Written by hand: http.cookies knows no Partitioned before Python 3.14. On another site
    # (https) the widget's cookie is third-party: SameSite=None, kept per embedding site.
    attributes = f"Path=/chat/{c.name}/; Max-Age={c.settings.cookie_days * 86400}; HttpOnly"
    attributes += "; Secure; SameSite=None; Partitioned" if c.secure_cookie else "; SameSite=Lax"
    response.headers.add("Set-Cookie", f"{COOKIE}={value}; {attributes}")
    return response


def _sign_in_refusal(c: WebChat, request: web.Request) -> _Refused:
    """Talon's own page used without a site token by someone not signed in."""
    if request.app.get(CONSOLE_AUTH) is None or not c.settings.console_users:
        return _Refused(403, "open this page from a site that embeds the chat, or with #site=TOKEN")
    return _Refused(
        401, "sign in to chat", sign_in=f"/console/login?next={quote(f'/chat/{c.name}/', safe='')}"
    )


# ---------------------------------------------------------------- messages


@dataclass
class _Post:
    event_id: str = ""
    text: str = ""
    attachments: list[Attachment] | None = None
    notes: list[str] | None = None


async def _messages(c: WebChat, request: web.Request) -> web.Response:
    who = _who(c, request, posting=True)
    if request.content_type == "multipart/form-data":
        post = await _read_multipart(c, request, who.chat)
    else:
        post = await _read_json(request)
    text = post.text
    if post.notes:
        text = "\n".join([text, *post.notes]).strip()
    attachments = tuple(post.attachments or ())
    if not text.strip() and not attachments:
        raise _Refused(400, "empty message: write something or attach a file")
    try:
        result = await c.submit(who.chat, post.event_id, text, attachments, sender=who.sender)
    except (RuntimeError, TransientError):
        raise _Refused(503, "the chat is restarting; try again in a moment") from None
    return web.json_response({"status": str(result.status), "reply": result.reply})


def _event_id(value: Any) -> str:
    if not isinstance(value, str) or not _EVENT_ID.match(value):
        raise _Refused(400, "event_id must be 8-80 letters, digits, - or _ (the page makes one per message)")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise _Refused(400, "text must be a string")
    if len(value) > MAX_TEXT:
        raise _Refused(413, f"the message is longer than {MAX_TEXT} characters")
    return value


async def _read_json(request: web.Request) -> _Post:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise _Refused(400, "the body must be JSON: {event_id, text}") from None
    if not isinstance(body, dict):
        raise _Refused(400, "the body must be a JSON object: {event_id, text}")
    return _Post(event_id=_event_id(body.get("event_id")), text=_text(body.get("text", "")))


async def _read_multipart(c: WebChat, request: web.Request, visitor: str) -> _Post:
    """Fields in order: ``event_id`` first (it names the files, so a retry overwrites its own),
    then ``text`` and ``file`` parts; each file is kept up to the channel's size cap."""
    post = _Post(attachments=[], notes=[])
    reader = await request.multipart()
    folder = c.files_dir / c.name / visitor
    files = 0
    while True:
        part = await reader.next()
        if part is None:
            break
        if not isinstance(part, BodyPartReader):
            raise _Refused(400, "nested multipart bodies are not accepted")
        if part.name == "event_id":
            post.event_id = _event_id((await part.read(decode=True))[:200].decode("utf-8", "replace"))
        elif part.name == "text":
            raw = await _read_capped(part, MAX_TEXT * 4)
            if raw is None:
                raise _Refused(413, f"the message is longer than {MAX_TEXT} characters")
            post.text = _text(raw.decode("utf-8", "replace"))
        elif part.name == "file":
            if not post.event_id:
                raise _Refused(400, "event_id must come before the files")
            files += 1
            if files > c.settings.max_files_per_message:
                raise _Refused(413, f"at most {c.settings.max_files_per_message} files per message")
            name = inbox_name(part.filename or "file")
            dest = folder / f"{post.event_id}_{files}_{name}"
            size = await _save(part, dest, c.settings.max_attachment_bytes)
            if size is None:
                assert post.notes is not None
                post.notes.append(
                    f"[attachment {name} skipped: over the {c.settings.max_attachment_bytes} byte limit]"
                )
            else:
                mime = part.headers.get("Content-Type")
                assert post.attachments is not None
                post.attachments.append(Attachment(name=name, path=str(dest), mime_type=mime, size=size))
        else:
            await part.release()
    if not post.event_id:
        raise _Refused(400, "event_id is missing")
    return post


async def _read_capped(part: BodyPartReader, cap: int) -> bytes | None:
    data = bytearray()
    while chunk := await part.read_chunk(_READ):
        data += chunk
        if len(data) > cap:
            await part.release()
            return None
    return bytes(data)


async def _save(part: BodyPartReader, dest: Path, cap: int) -> int | None:
    """Stream one file part to ``dest``; None (and nothing kept) when it is over ``cap`` bytes."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    size = 0
    with tmp.open("wb") as out:
        while chunk := await part.read_chunk(_READ):
            size += len(chunk)
            if size > cap:
                break
            await asyncio.to_thread(out.write, chunk)
    if size > cap:
        tmp.unlink(missing_ok=True)
        await part.release()
        return None
    tmp.replace(dest)
    return size


# ---------------------------------------------------------------- the event stream


def message_json(c: WebChat, m: WebMessage) -> dict[str, Any]:
    found: dict[str, Any] = {
        "id": m.id,
        "seq": m.seq,
        "role": m.role,
        "format": m.format,
        "body": m.body,
        "deleted": m.deleted,
        "event_id": m.event_id,
        "at": m.created_at,
    }
    if m.format == "file" and not m.deleted:
        found["file"] = {"name": m.file_name, "size": m.file_size, "url": f"/chat/{c.name}/api/files/{m.id}"}
    return found


def _resume_point(request: web.Request) -> int:
    values = [request.headers.get("Last-Event-ID", ""), request.query.get("after", "")]
    return max((int(v) for v in values if v.isdigit() and len(v) < 19), default=0)


async def _events(c: WebChat, request: web.Request) -> web.StreamResponse:
    who = _who(c, request)
    visitor = who.chat
    after = _resume_point(request)
    queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=256)
    if not c.open_stream(visitor, queue):
        raise _Refused(429, f"at most {c.settings.max_streams_per_visitor} chat tabs at once")
    try:
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "X-Accel-Buffering": "no",  # a reverse proxy passes events on at once
            }
        )
        _cors(c, request, response)
        await response.prepare(request)
        await response.write(b"retry: 1000\n\n")
        after = await _send_changes(c, response, visitor, after)
        while True:
            try:
                wake = await asyncio.wait_for(queue.get(), HEARTBEAT)
            except TimeoutError:
                wake = {"ping": True}
            if wake.get("close") or not who.alive():  # signed out: the page asks again
                break
            if wake.get("ping"):
                await response.write(b": ping\n\n")
                continue
            if "working" in wake:
                data = json.dumps({"on": bool(wake["working"])})
                await response.write(f"event: working\ndata: {data}\n\n".encode())
                continue
            after = await _send_changes(c, response, visitor, after)
    except ConnectionResetError:  # the page went away; it resumes where it was when it comes back
        return response
    finally:
        c.close_stream(visitor, queue)
    with contextlib.suppress(ConnectionResetError):
        await response.write_eof()
    return response


async def _send_changes(c: WebChat, response: web.StreamResponse, visitor: str, after: int) -> int:
    """Write every change after ``after``; returns the last seq written."""
    while True:
        changes = await c.changes(visitor, after, BATCH)
        for m in changes:
            data = json.dumps(message_json(c, m), ensure_ascii=False)
            await response.write(f"id: {m.seq}\nevent: message\ndata: {data}\n\n".encode())
            after = max(after, m.seq)
        if len(changes) < BATCH:
            return after


# ---------------------------------------------------------------- files


async def _file(c: WebChat, request: web.Request) -> web.StreamResponse:
    visitor = _who(c, request).chat
    raw = request.match_info["id"]
    m = await c.message(int(raw)) if raw.isdigit() and len(raw) < 19 else None
    # Another visitor's file is "not found" too: nothing says it exists.
    if m is None or m.chat_id != visitor or m.format != "file" or m.deleted or not m.file_path:
        raise _Refused(404, "no such file in this chat")
    path = Path(m.file_path)
    if not await asyncio.to_thread(path.is_file):
        raise _Refused(404, "the file is no longer kept")
    name = m.file_name or "file"
    return web.FileResponse(
        path,
        headers={
            "Content-Type": "application/octet-stream",
            "Content-Disposition": f"attachment; filename*=UTF-8''{quote(name)}",
            "Content-Security-Policy": "sandbox; default-src 'none'",
            "Cache-Control": "private, no-store",
        },
    )
