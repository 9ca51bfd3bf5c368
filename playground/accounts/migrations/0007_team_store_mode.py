from django.db import migrations, models


class Migration(migrations.Migration):
    """A team's storage mode for its records' text (issue 37), and its audit action."""

    dependencies = [
        ("accounts", "0006_audit_actions_api_keys"),
    ]

    operations = [
        migrations.AddField(
            model_name="team",
            name="store_mode",
            field=models.CharField(
                choices=[
                    ("full", "Full: the text as sent"),
                    ("redacted", "Redacted: sensitive values replaced"),
                    ("metadata", "Metadata only: no prompt or answer text"),
                ],
                db_default="full",
                default="full",
                max_length=10,
            ),
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
                ],
                max_length=40,
            ),
        ),
    ]
