"""Images of tool results in both wire formats, checked by the stand-ins' validators."""

from __future__ import annotations

from gateway.runtime.model import ChatMessage, ImageBlock, ToolCall
from gateway.runtime.providers.anthropic_provider import to_anthropic_messages
from gateway.runtime.providers.openai_provider import to_openai_messages
from tests.fakes import model_anthropic, model_openai

IMAGE = ImageBlock("image/png", "iVBORw0KGgo=")
CALLS = (ToolCall("t1", "view_image", {"file_path": "a.png"}), ToolCall("t2", "bash", {"command": "ls"}))
TRANSCRIPT = [
    ChatMessage("user", "look"),
    ChatMessage("assistant", tool_calls=CALLS),
    ChatMessage("tool", '{"width": 2}', tool_call_id="t1", images=(IMAGE,)),
    ChatMessage("tool", '{"exit_code": 0}', tool_call_id="t2"),
    ChatMessage("assistant", "done"),
]


def test_openai_sends_the_images_after_every_tool_message_of_the_step() -> None:
    messages = to_openai_messages("", TRANSCRIPT)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "user", "assistant"]
    assert messages[2]["content"] == '{"width": 2}'
    assert messages[4]["content"] == [
        {"type": "text", "text": "The image(s) returned by tool call t1:"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    ]
    assert model_openai.validate({"model": "m", "messages": messages}) is None


def test_anthropic_puts_the_image_inside_its_tool_result() -> None:
    messages = to_anthropic_messages(TRANSCRIPT)
    first, second = messages[2]["content"]
    assert first["content"] == [
        {"type": "text", "text": '{"width": 2}'},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
    ]
    assert second["content"] == '{"exit_code": 0}'
    assert model_anthropic.validate({"model": "m", "max_tokens": 10, "messages": messages}) is None


def test_without_images_both_say_the_image_was_not_shown() -> None:
    anthropic = to_anthropic_messages(TRANSCRIPT, images=False)
    openai = to_openai_messages("", TRANSCRIPT, images=False)
    assert anthropic[2]["content"][0]["content"].startswith('{"width": 2}\n[1 image(s) not shown')
    assert openai[2]["content"].startswith('{"width": 2}\n[1 image(s) not shown')
    assert [m["role"] for m in openai] == ["user", "assistant", "tool", "tool", "assistant"]


def test_the_stand_ins_reject_what_the_apis_reject() -> None:
    tool_with_image = to_openai_messages("", TRANSCRIPT)
    tool_with_image[2]["content"] = tool_with_image[4]["content"]
    assert "takes text only" in (model_openai.validate({"model": "m", "messages": tool_with_image}) or "")
    bad = to_anthropic_messages(TRANSCRIPT)
    bad[2]["content"][0]["content"][1]["source"]["media_type"] = "image/bmp"
    assert "media_type" in (model_anthropic.validate({"model": "m", "max_tokens": 10, "messages": bad}) or "")
