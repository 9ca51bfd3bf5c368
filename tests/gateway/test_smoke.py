from __future__ import annotations

import openai
import pytest

from playground.usage.models import UsageRecord
from tests.fakes.upstream import FakeUpstream
from tests.gateway.conftest import IssuedKey
from tests.support.browser import LiveApp


@pytest.mark.django_db(transaction=True)
def test_openai_sdk_streams_through_the_gateway(live_app: LiveApp, gateway_key: IssuedKey, fake_upstream: FakeUpstream) -> None:
    client = openai.OpenAI(base_url=live_app.url + "/v1", api_key=gateway_key.secret, max_retries=0)
    stream = client.chat.completions.create(
        model="@cf/moonshotai/kimi-k2.5", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text
    answer = client.chat.completions.create(model="@cf/moonshotai/kimi-k2.5", messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content
    records = list(UsageRecord.objects.order_by("id"))
    assert [r.path for r in records] == ["gateway", "gateway"]
    print([(r.status, r.prompt_tokens, r.completion_tokens, r.total_cost, r.api_key_id, r.error_text) for r in records])
    print(fake_upstream.requests[0].path, fake_upstream.requests[0].json)
