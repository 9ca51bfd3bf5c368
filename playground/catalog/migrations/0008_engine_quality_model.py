from __future__ import annotations

from django.db import migrations


def seed(apps, schema_editor):  # type: ignore[no-untyped-def]
    """The seed again: Qwen2.5-Coder 1.5B Instruct joins the engine's models as its quality model,
    priced as Kimi K2.5 like the other two (issue 38)."""
    from playground.catalog.seed import catalog_seed

    catalog_seed(apps.get_model("catalog", "CatalogModel"), apps.get_model("catalog", "PriceCard"))


class Migration(migrations.Migration):
    dependencies = [("catalog", "0007_price_card_cache_write_price")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
