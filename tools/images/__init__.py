"""Pictures out: ``image_generate`` and ``image_edit`` through the OpenAI-compatible images
endpoint of talon.yaml's ``images:`` (label ``image.generate``)."""

from __future__ import annotations

from tools.base import HostTool
from tools.images import image_edit, image_generate

TOOLS: tuple[HostTool, ...] = (image_generate.TOOL, image_edit.TOOL)
