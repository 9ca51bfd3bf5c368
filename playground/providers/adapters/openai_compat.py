"""Any OpenAI-compatible endpoint: `POST {base_url}/chat/completions` with a Bearer key."""

from __future__ import annotations

from typing import Any

from playground.providers.adapters.base import HTTPChatAdapter
from playground.providers.adapters.request import ChatRequest


class OpenAICompatAdapter(HTTPChatAdapter):
    def __init__(self, *, base_url: str, token: str) -> None:
        super().__init__(token=token)
        self.base_url = base_url.rstrip("/")

    def openai_endpoint(self) -> str:
        return f"{self.base_url}/chat/completions"

    def endpoint(self, request: ChatRequest) -> str:
        return self.openai_endpoint()

    def payload(self, request: ChatRequest) -> dict[str, Any]:
        return {"model": request.model, **super().payload(request)}
