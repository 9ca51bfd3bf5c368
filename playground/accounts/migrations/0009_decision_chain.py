import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    """Audit events become links of their team's chain of decision records (issue 37); existing
    events are chained by `routing.0002_policy_chain`, with the routing policy versions."""

    dependencies = [
        ("accounts", "0008_audit_end_user_erased"),
    ]

    operations = [
        migrations.CreateModel(
            name="DecisionChain",
            fields=[
                (
                    "team",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="accounts.team",
                    ),
                ),
                ("length", models.PositiveIntegerField(default=0)),
                ("head", models.CharField(blank=True, max_length=64)),
            ],
        ),
        migrations.AddField(
            model_name="auditevent",
            name="chain_seq",
            field=models.PositiveIntegerField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="chain_digest",
            field=models.CharField(blank=True, editable=False, max_length=64),
        ),
        migrations.AddField(
            model_name="auditevent",
            name="chain_prev",
            field=models.CharField(blank=True, editable=False, max_length=64),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="created_at",
            field=models.DateTimeField(db_index=True, default=django.utils.timezone.now, editable=False),
        ),
        migrations.AddConstraint(
            model_name="auditevent",
            constraint=models.UniqueConstraint(fields=("team", "chain_seq"), name="audit_event_chain_place_unique"),
        ),
    ]
