import django.utils.timezone
from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps

from playground.accounts.chain import GENESIS, content_digest, link_hash
from playground.routing.chain import DECISION_KINDS


def chain_existing(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
    """Each team's audit events and policy versions, oldest first, chained as `chain_append` does."""
    kinds = [
        (kind.name, apps.get_model(kind.model._meta.label), kind.content) for kind in DECISION_KINDS
    ]
    DecisionChain = apps.get_model("accounts", "DecisionChain")
    Team = apps.get_model("accounts", "Team")
    for team_id in Team.objects.values_list("pk", flat=True).iterator():
        rows = [
            (row.created_at, order, row.pk, name, content, row)
            for order, (name, model, content) in enumerate(kinds)
            for row in model.objects.filter(team_id=team_id, chain_seq__isnull=True)
        ]
        rows.sort(key=lambda item: item[:3])
        prev = GENESIS
        for seq, (_, _, _, name, content, row) in enumerate(rows, start=1):
            row.chain_seq, row.chain_prev, row.chain_digest = seq, prev, content_digest(content(row))
            row.save(update_fields=["chain_seq", "chain_prev", "chain_digest"])
            prev = link_hash(seq=seq, kind=name, digest=row.chain_digest, prev=row.chain_prev)
        if rows:
            DecisionChain.objects.create(team_id=team_id, length=len(rows), head=prev)


class Migration(migrations.Migration):
    """Routing policy versions become links of their team's chain of decision records (issue 37),
    and the rows of both kinds that exist are chained in the order they were made."""

    dependencies = [
        ("accounts", "0009_decision_chain"),
        ("routing", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="routingpolicy",
            name="chain_seq",
            field=models.PositiveIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="routingpolicy",
            name="chain_digest",
            field=models.CharField(blank=True, editable=False, max_length=64),
        ),
        migrations.AddField(
            model_name="routingpolicy",
            name="chain_prev",
            field=models.CharField(blank=True, editable=False, max_length=64),
        ),
        migrations.AlterField(
            model_name="routingpolicy",
            name="created_at",
            field=models.DateTimeField(default=django.utils.timezone.now, editable=False),
        ),
        migrations.AddConstraint(
            model_name="routingpolicy",
            constraint=models.UniqueConstraint(
                fields=("team", "chain_seq"), name="routing_policy_chain_place_unique"
            ),
        ),
        migrations.RunPython(chain_existing, migrations.RunPython.noop),
    ]
