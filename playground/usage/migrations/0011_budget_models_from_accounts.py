"""The budget ledger models, moved here from `accounts` (whose 0005 forgot them) with their tables.

State only: the models keep their `accounts_*` tables through `db_table`, so no row is copied
or lost, and the constraints and the index keep their names. Their content types follow them
(and with them any permission on them), as a table rename would have taken them.
"""

import django.db.models.deletion
import playground.usage.models
from decimal import Decimal
from django.conf import settings
from django.db import migrations, models

MOVED = ["teambudget", "budgetledger", "budgetreservation", "budgetalert"]


def content_types_follow(apps, schema_editor, *, source="accounts", target="usage"):  # type: ignore[no-untyped-def]
    """The moved models' content types relabelled, unless the target app already has its own."""
    ContentType = apps.get_model("contenttypes", "ContentType")
    taken = ContentType.objects.filter(app_label=target, model__in=MOVED).values_list("model", flat=True)
    ContentType.objects.filter(app_label=source, model__in=MOVED).exclude(model__in=list(taken)).update(
        app_label=target
    )


def content_types_go_back(apps, schema_editor):  # type: ignore[no-untyped-def]
    content_types_follow(apps, schema_editor, source="usage", target="accounts")


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0005_budget_models_moved_to_usage'),
        ('contenttypes', '0002_remove_content_type_name'),
        ('usage', '0010_record_price_label'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='BudgetLedger',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('month', models.DateField(help_text="The first day of the month, in the team's time zone")),
                        ('spent_usd', models.DecimalField(decimal_places=10, default=Decimal('0'), max_digits=18)),
                        ('reserved_usd', models.DecimalField(decimal_places=10, default=Decimal('0'), max_digits=18)),
                        ('team', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='budget_ledgers', to='accounts.team')),
                        ('user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'accounts_budgetledger',
                    },
                ),
                migrations.CreateModel(
                    name='BudgetReservation',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('amount_usd', models.DecimalField(decimal_places=10, max_digits=18)),
                        ('actual_usd', models.DecimalField(blank=True, decimal_places=10, max_digits=18, null=True)),
                        ('label', models.CharField(blank=True, help_text='What reserved it (path, source)', max_length=120)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('settled_at', models.DateTimeField(blank=True, null=True)),
                        ('member_ledger', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='usage.budgetledger')),
                        ('team', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='budget_reservations', to='accounts.team')),
                        ('team_ledger', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='usage.budgetledger')),
                    ],
                    options={
                        'db_table': 'accounts_budgetreservation',
                    },
                ),
                migrations.CreateModel(
                    name='TeamBudget',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('monthly_limit_usd', models.DecimalField(blank=True, decimal_places=2, max_digits=12, null=True)),
                        ('alert_thresholds', models.JSONField(default=list, validators=[playground.usage.models.thresholds_validate])),
                        ('allow_unpriced', models.BooleanField(default=False)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('team', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='budget', to='accounts.team')),
                    ],
                    options={
                        'db_table': 'accounts_teambudget',
                    },
                ),
                migrations.CreateModel(
                    name='BudgetAlert',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('month', models.DateField()),
                        ('threshold', models.PositiveSmallIntegerField()),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('emailed_at', models.DateTimeField(blank=True, null=True)),
                        ('team', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='budget_alerts', to='accounts.team')),
                    ],
                    options={
                        'db_table': 'accounts_budgetalert',
                        'constraints': [models.UniqueConstraint(fields=('team', 'month', 'threshold'), name='one_alert_per_threshold_month')],
                    },
                ),
                migrations.AddConstraint(
                    model_name='budgetledger',
                    constraint=models.UniqueConstraint(condition=models.Q(('user__isnull', True)), fields=('team', 'month'), name='one_team_ledger_per_month'),
                ),
                migrations.AddConstraint(
                    model_name='budgetledger',
                    constraint=models.UniqueConstraint(condition=models.Q(('user__isnull', False)), fields=('team', 'month', 'user'), name='one_member_ledger_per_month'),
                ),
                migrations.AddIndex(
                    model_name='budgetreservation',
                    index=models.Index(fields=['team', 'settled_at', 'created_at'], name='accounts_bu_team_id_fb918e_idx'),
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(content_types_follow, content_types_go_back),
    ]
