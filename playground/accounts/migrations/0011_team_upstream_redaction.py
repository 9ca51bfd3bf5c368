from django.db import migrations, models


class Migration(migrations.Migration):
    """Upstream redaction (issue 37): whether a team's requests go upstream with placeholders
    instead of sensitive values, and its audit action."""

    dependencies = [
        ("accounts", "0010_audit_retention"),
    ]

    operations = [
        migrations.AddField(
            model_name="team",
            name="upstream_redaction",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="action",
            field=models.CharField(
                choices=[
                    ("member.invited", "Invited a member"),
                    ("invitation.revoked", "Revoked an invitation"),
                    ("member.joined", "Joined the team"),
                    ("member.role_changed", "Changed a role"),
                    ("member.removed", "Removed a member"),
                    ("member.left", "Left the team"),
                    ("team.ownership_transferred", "Transferred ownership"),
                    ("connection.created", "Added a connection"),
                    ("connection.updated", "Changed a connection"),
                    ("connection.deleted", "Deleted a connection"),
                    ("price_override.created", "Added a price override"),
                    ("price_override.deleted", "Deleted a price override"),
                    ("price_card.created", "Added a global price card"),
                    ("budget.changed", "Changed the team budget"),
                    ("budget.member_changed", "Changed a member's budget"),
                    ("budget.unpriced_changed", "Changed whether unpriced requests are allowed"),
                    ("api_key.created", "Created an API key"),
                    ("api_key.updated", "Changed an API key"),
                    ("api_key.revoked", "Revoked an API key"),
                    ("team.store_mode_changed", "Changed what request records keep"),
                    ("team.upstream_redaction_changed", "Changed what requests send upstream"),
                    ("team.retention_changed", "Changed how long request records are kept"),
                    ("team.end_user_erased", "Erased an end user's data"),
                ],
                max_length=40,
            ),
        ),
    ]
