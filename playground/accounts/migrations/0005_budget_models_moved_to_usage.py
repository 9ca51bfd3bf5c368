"""The budget ledger models moved to `usage`, where their behaviour is: accounts forgets them.

State only: the tables stay as they are (the models in `usage` keep them with `db_table`), so
no row is copied or lost. usage 0011 takes them into its state.
"""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0004_team_budget_allow_unpriced'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name='BudgetReservation'),  # first: it points at the ledgers
                migrations.DeleteModel(name='BudgetAlert'),
                migrations.DeleteModel(name='BudgetLedger'),
                migrations.DeleteModel(name='TeamBudget'),
            ],
            database_operations=[],
        ),
    ]
