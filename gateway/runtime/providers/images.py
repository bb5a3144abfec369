"""Images in tool results, as both providers send them (or, for a text-only model, do not).

A tool result's images (:attr:`gateway.runtime.model.ChatMessage.images`) reach the model
as image content when ``providers.<name>.images`` is true and the model is not one of its
``text_only_models``; otherwise the result's text goes alone with a note saying the image
was not shown, and the text already holds the image's type, size and dimensions.
"""

from __future__ import annotations

from gateway.runtime.model import ImageBlock

__all__ = ["data_url", "not_shown"]


def not_shown(text: str, images: tuple[ImageBlock, ...]) -> str:
    """``text`` with a note that its ``images`` were left out for this model."""
    if not images:
        return text
    note = (
        f"[{len(images)} image(s) not shown: this model takes no images (providers.<name>.images or "
        "text_only_models in talon.yaml); the text above describes them]"
    )
    return f"{text}\n{note}" if text else note


def data_url(image: ImageBlock) -> str:
    """``data:<media type>;base64,<data>``, as Chat Completions ``image_url`` parts take it."""
    return f"data:{image.media_type};base64,{image.data}"
