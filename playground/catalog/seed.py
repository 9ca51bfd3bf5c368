"""The catalogue's starting data, from docs/reference/workers-ai-api.md §0, §4, §8.

Applied by a data migration (with the historical models) and safe to apply again: rows
are matched on their natural keys and updated in place.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

PRICING_SOURCE = "https://developers.cloudflare.com/workers-ai/platform/pricing/ (2026-08-28)"
ENGINE_MODEL_ID = "@local/smollm2-135m-instruct"  # the engine's default model
ENGINE_GEMMA_ID = "@local/gemma-3-270m"  # the engine's second model
ENGINE_QUALITY_ID = "@local/qwen2.5-coder-1.5b-instruct"  # the third, with ENGINE_MODEL=quality
KIMI_K25 = "@cf/moonshotai/kimi-k2.5"
KIMI_K26 = "@cf/moonshotai/kimi-k2.6"


@dataclass(frozen=True)
class Price:
    effective_from: dt.date
    input: str
    cached: str | None
    output: str
    label: str
    source: str = PRICING_SOURCE


@dataclass(frozen=True)
class SeedModel:
    model_id: str
    display_name: str
    context_window: int | None
    prices: tuple[Price, ...]
    served_by: str = "workers-ai,openai-compatible"
    capabilities: dict[str, bool] = field(default_factory=dict)
    deprecated_on: dt.date | None = None
    alias_of: str | None = None
    priced_as: str | None = None  # priced with that model's card, it has none of its own
    notes: str = ""


LAUNCH = dt.date(2026, 1, 1)  # the earliest date our cards claim; older requests are unpriced
TOOLS = {"supports_tools": True}
# The embedded engine's models: no images; tools and JSON by grammar; the engine's own queue.
ENGINE = {"supports_tools": True, "supports_json_schema": True, "supports_batch": True}
KIMI = {
    "supports_vision": True,
    "supports_tools": True,
    "supports_json_schema": True,
    "supports_reasoning": True,
    "supports_batch": True,
}


def _list_price(model: str, input_: str, output: str, cached: str | None = None) -> tuple[Price, ...]:
    cached_text = f" / ${cached} cached" if cached else ""
    label = f"Workers AI list price for {model} (${input_} in{cached_text} / ${output} out)"
    return (Price(LAUNCH, input_, cached, output, label),)


SEED: tuple[SeedModel, ...] = (
    SeedModel(
        KIMI_K26,
        "Kimi K2.6",
        262_144,
        _list_price("Kimi K2.6", "0.95", "4.00", cached="0.16"),
        capabilities=KIMI,
        notes="Workers Paid plan only (403 / 5035 on Free). Reasoning arrives in `reasoning`.",
    ),
    SeedModel(
        KIMI_K25,
        "Kimi K2.5",
        256_000,
        _list_price("Kimi K2.5", "0.60", "3.00", cached="0.10"),
        capabilities=KIMI,
        deprecated_on=dt.date(2026, 5, 30),
        alias_of=KIMI_K26,
        notes="Deprecated 2026-05-30: requests are served and billed as Kimi K2.6 from that day.",
    ),
    SeedModel(
        "@cf/moonshotai/kimi-k2.7-code",
        "Kimi K2.7 Code",
        262_144,
        _list_price("Kimi K2.7 Code", "0.95", "4.00", cached="0.19"),
        capabilities=KIMI,
        notes="Workers Paid plan only.",
    ),
    SeedModel(
        "@cf/openai/gpt-oss-120b",
        "GPT-OSS 120B",
        128_000,
        _list_price("gpt-oss-120b", "0.35", "0.75"),
        capabilities={**TOOLS, "supports_reasoning": True, "supports_batch": True},
    ),
    SeedModel(
        "@cf/openai/gpt-oss-20b",
        "GPT-OSS 20B",
        128_000,
        _list_price("gpt-oss-20b", "0.20", "0.30"),
        capabilities={**TOOLS, "supports_reasoning": True, "supports_batch": True},
    ),
    SeedModel(
        "@cf/meta/llama-3.3-70b-instruct-fp8-fast",
        "Llama 3.3 70B fp8 fast",
        24_000,
        _list_price("llama-3.3-70b-instruct-fp8-fast", "0.293", "2.253"),
        capabilities={**TOOLS, "supports_json_schema": True, "supports_batch": True},
    ),
    SeedModel(
        "@cf/meta/llama-4-scout-17b-16e-instruct",
        "Llama 4 Scout 17B",
        131_000,
        _list_price("llama-4-scout-17b-16e-instruct", "0.27", "0.85"),
        capabilities={**TOOLS, "supports_vision": True},
    ),
    SeedModel(
        "@cf/mistralai/mistral-small-3.1-24b-instruct",
        "Mistral Small 3.1 24B",
        128_000,
        _list_price("mistral-small-3.1-24b-instruct", "0.351", "0.555"),
        capabilities={**TOOLS, "supports_vision": True},
    ),
    SeedModel(
        "@cf/qwen/qwen3-30b-a3b-fp8",
        "Qwen3 30B A3B fp8",
        32_768,
        _list_price("qwen3-30b-a3b-fp8", "0.051", "0.335"),
        capabilities={**TOOLS, "supports_reasoning": True},
    ),
    SeedModel(
        "@cf/zai-org/glm-4.7-flash",
        "GLM 4.7 Flash",
        131_072,
        _list_price("glm-4.7-flash", "0.06", "0.40"),
        capabilities={**TOOLS, "supports_reasoning": True},
    ),
    SeedModel(
        "@cf/google/gemma-4-26b-a4b-it",
        "Gemma 4 26B A4B",
        256_000,
        _list_price("gemma-4-26b-a4b-it", "0.10", "0.30"),
        capabilities={"supports_vision": True},
    ),
    SeedModel(
        ENGINE_MODEL_ID,
        "SmolLM2 135M Instruct (embedded engine)",
        8_192,
        (),  # no real charge: priced with Kimi K2.5's card, what these tokens would cost on Workers AI
        served_by="engine",
        priced_as=KIMI_K25,
        capabilities=ENGINE,
        notes=(
            "Runs on this machine's CPU. Text only. Instruction-tuned (chat template with a system role): "
            "answers short questions and simple instructions in sentences, but often gets facts wrong and "
            "loses the thread in long answers. Tools and JSON are constrained by grammar."
        ),
    ),
    SeedModel(
        ENGINE_GEMMA_ID,
        "Gemma 3 270M (embedded engine)",
        32_768,
        (),  # priced as Kimi K2.5, like the default engine model
        served_by="engine",
        priced_as=KIMI_K25,
        capabilities=ENGINE,
        notes=(
            "Runs on this machine's CPU. Text only. Pretrained, not instruction-tuned: it continues text "
            "rather than answering (often repeating the question). Real tokens, latency and prefix-cache "
            "effects; tools and JSON are constrained by grammar."
        ),
    ),
    SeedModel(
        ENGINE_QUALITY_ID,
        "Qwen2.5-Coder 1.5B Instruct (embedded engine)",
        32_768,
        (),  # priced as Kimi K2.5, like the engine's other models
        served_by="engine",
        priced_as=KIMI_K25,
        capabilities=ENGINE,
        notes=(
            "Runs on this machine's CPU, when installed (`make run ENGINE_MODEL=quality`). Text only. "
            "The quality local model: instruction-tuned (for code first), 1.5B parameters against "
            "SmolLM2's 135M, and several times slower per token than the small models. Tools and JSON "
            "are constrained by grammar."
        ),
    ),
)

CAPABILITY_FIELDS = (
    "supports_vision",
    "supports_tools",
    "supports_json_schema",
    "supports_json_schema_streaming",
    "supports_batch",
    "supports_reasoning",
)


def catalog_seed(catalog_model: Any, price_card: Any) -> None:
    """Upsert `SEED` using the given model classes (real or historical)."""
    rows = {}
    # Seeded cards are the global ones, never a team's override of the same day (the
    # historical model of the seeding migration has no team field yet).
    has_team = any(field.name == "team" for field in price_card._meta.get_fields())
    global_card: dict[str, Any] = {"team": None} if has_team else {}
    for seed in SEED:
        defaults = {
            "display_name": seed.display_name,
            "served_by": seed.served_by,
            "context_window": seed.context_window,
            "deprecated_on": seed.deprecated_on,
            "notes": seed.notes,
            **{name: seed.capabilities.get(name, False) for name in CAPABILITY_FIELDS},
        }
        rows[seed.model_id], _ = catalog_model.objects.update_or_create(
            model_id=seed.model_id, defaults=defaults
        )
        for price in seed.prices:
            price_card.objects.update_or_create(
                model=rows[seed.model_id],
                effective_from=price.effective_from,
                **global_card,
                defaults={
                    "input_per_m": Decimal(price.input),
                    "cached_input_per_m": Decimal(price.cached) if price.cached else None,
                    "output_per_m": Decimal(price.output),
                    "label": price.label,
                    "source": price.source,
                },
            )
    # The engine's model has been priced as Kimi K2.5 since the migration that added the field.
    has_priced_as = any(field.name == "priced_as" for field in catalog_model._meta.get_fields())
    for seed in SEED:
        if seed.alias_of:
            catalog_model.objects.filter(model_id=seed.model_id).update(alias_of=rows[seed.alias_of])
        if seed.priced_as and has_priced_as:
            catalog_model.objects.filter(model_id=seed.model_id).update(priced_as=rows[seed.priced_as])
