from __future__ import annotations

from django.db import migrations


def seed(apps, schema_editor):  # type: ignore[no-untyped-def]
    """The seed again: the engine's default model is now SmolLM2 135M Instruct, priced as Kimi K2.5,
    and Gemma 3 270M stays as its second model (issue 25)."""
    from playground.catalog.seed import catalog_seed

    catalog_seed(apps.get_model("catalog", "CatalogModel"), apps.get_model("catalog", "PriceCard"))


class Migration(migrations.Migration):
    dependencies = [("catalog", "0005_engine_priced_as_kimi_k25")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
