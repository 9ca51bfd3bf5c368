"""Cloudflare Workers AI native endpoint: `POST {base}/accounts/{account_id}/ai/run/{model}`.

Also serves the embedded engine, which speaks the same API (each team under its own account id).
Replies may be native frames or OpenAI chunks, and JSON in a v4 envelope; the shared
reading in `base` (with `frames` and `assembly`) handles all of them.
"""

from __future__ import annotations

from urllib.parse import quote

from playground.providers.adapters.base import HTTPChatAdapter
from playground.providers.adapters.request import ChatRequest
from playground.providers.model_ids import model_id_path

DEFAULT_BASE_URL = "https://api.cloudflare.com/client/v4"


class WorkersAIAdapter(HTTPChatAdapter):
    def __init__(self, *, base_url: str, account_id: str, token: str) -> None:
        super().__init__(token=token)
        self.base_url = base_url.rstrip("/")
        self.account_id = account_id

    def openai_endpoint(self) -> str:
        """Workers AI's OpenAI-compatible chat completions (the model goes in the body)."""
        return f"{self.base_url}/accounts/{quote(self.account_id, safe='')}/ai/v1/chat/completions"

    def endpoint(self, request: ChatRequest) -> str:
        # The model id (e.g. "@cf/moonshotai/kimi-k2.5") goes in the path, not the body: both
        # parts are encoded so that neither can climb the path or start a query string.
        account = quote(self.account_id, safe="")
        return f"{self.base_url}/accounts/{account}/ai/run/{model_id_path(request.model)}"
