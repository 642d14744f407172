"""Pure mapping from static config entries to MCP wire objects."""

from __future__ import annotations

import base64
import re
from typing import Any

from gateway.protocol.errors import InvalidParams

from .config import StaticPrompt, StaticResource

__all__ = ["prompt_definition", "resource_definition", "render_prompt", "resource_contents"]

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def prompt_definition(prompt: StaticPrompt) -> dict[str, Any]:
    out: dict[str, Any] = {"name": prompt.name}
    if prompt.title:
        out["title"] = prompt.title
    if prompt.description:
        out["description"] = prompt.description
    if prompt.arguments:
        out["arguments"] = [
            {k: v for k, v in (("name", a.name), ("description", a.description), ("required", a.required)) if v is not None}
            for a in prompt.arguments
        ]
    return out


def render_prompt(prompt: StaticPrompt, arguments: dict[str, Any]) -> dict[str, Any]:
    """GetPromptResult with ``{arg}`` placeholders filled; a missing required argument is -32602."""
    missing = [a.name for a in prompt.arguments if a.required and not arguments.get(a.name)]
    if missing:
        raise InvalidParams(f"Missing required argument(s) for prompt {prompt.name}: {', '.join(missing)}",
                            {"missing": missing})
    known = {a.name for a in prompt.arguments}
    unknown = sorted(set(arguments) - known)
    if unknown:
        raise InvalidParams(f"Unknown argument(s) for prompt {prompt.name}: {', '.join(unknown)}", {"unknown": unknown})
    values = {a.name: str(arguments.get(a.name, "")) for a in prompt.arguments}

    def fill(text: str) -> str:
        return _PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), text)

    result: dict[str, Any] = {
        "messages": [{"role": m.role, "content": {"type": "text", "text": fill(m.text)}} for m in prompt.messages]
    }
    if prompt.description:
        result["description"] = prompt.description
    return result


def resource_definition(res: StaticResource, size: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {"uri": res.uri, "name": res.name}
    if res.title:
        out["title"] = res.title
    if res.description:
        out["description"] = res.description
    if res.mime_type:
        out["mimeType"] = res.mime_type
    if size is not None:
        out["size"] = size
    return out


def _is_text(mime: str | None, data: bytes) -> bool:
    if mime is None:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True
    return mime.startswith("text/") or mime in {"application/json", "application/yaml", "application/xml"} or mime.endswith("+json")


def resource_contents(res: StaticResource, data: bytes | None) -> dict[str, Any]:
    """One ``contents`` item: ``text`` for text, base64 ``blob`` for binary files."""
    item: dict[str, Any] = {"uri": res.uri}
    if res.mime_type:
        item["mimeType"] = res.mime_type
    if res.text is not None:
        item["text"] = res.text
    elif data is not None and _is_text(res.mime_type, data):
        item["text"] = data.decode("utf-8")
    else:
        item["blob"] = base64.b64encode(data or b"").decode("ascii")
    return item
