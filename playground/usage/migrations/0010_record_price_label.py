from __future__ import annotations

from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def labels_and_cards(apps, schema_editor):  # type: ignore[no-untyped-def]
    """Records written so far are labelled with their card's label (what they showed), and a model
    priced as another (the engine's) loses the global cards of its own that priced nothing: they
    would never price anything again, and the Catalogue page would still list them."""
    PriceCard = apps.get_model("catalog", "PriceCard")
    UsageRecord = apps.get_model("usage", "UsageRecord")
    UsageRecord.objects.filter(price_card__isnull=False).update(
        price_label=Subquery(PriceCard.objects.filter(pk=OuterRef("price_card_id")).values("label")[:1])
    )
    PriceCard.objects.filter(team__isnull=True, model__priced_as__isnull=False).exclude(
        pk__in=UsageRecord.objects.filter(price_card__isnull=False).values("price_card_id")
    ).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0005_engine_priced_as_kimi_k25"),
        ("usage", "0009_rollup_user_connection_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="usagerecord",
            name="price_label",
            field=models.CharField(blank=True, max_length=300),
        ),
        migrations.RunPython(labels_and_cards, migrations.RunPython.noop),
    ]
