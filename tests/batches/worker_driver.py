"""Run in a subprocess by the worker tests, with the worker's environment (its own database).

python -m tests.batches.worker_driver setup <upstream base url> <items>   -> prints the batch id
python -m tests.batches.worker_driver status <batch id>                    -> prints JSON
"""

from __future__ import annotations

import json
import sys

import django


def main() -> None:
    django.setup()
    from django.contrib.auth.models import User
    from django.db.models import Count

    from playground.accounts.models import Membership, Role, Team
    from playground.batches.inputs import utf8_lines
    from playground.batches.models import Batch
    from playground.batches.services.actions import batch_confirm
    from playground.batches.services.drafts import BatchInput, batch_draft_create
    from playground.providers.models import ConnectionKind, ProviderConnection
    from playground.providers.services import connection_save
    from playground.usage.models import UsageRecord

    command = sys.argv[1]
    if command == "setup":
        base_url, count = sys.argv[2], int(sys.argv[3])
        team = Team.objects.create(name="Worker test", slug="worker-test")
        user = User.objects.create_user("worker-owner", password="x" * 12)
        Membership.objects.create(team=team, user=user, role=Role.OWNER)
        connection = connection_save(
            connection=ProviderConnection(
                team=team, name="Gateway", kind=ConnectionKind.OPENAI_COMPATIBLE, base_url=base_url
            ),
            token="sk-worker-test",
        )
        lines = "\n".join(
            json.dumps({"messages": [{"role": "user", "content": f"Q{i}"}], "external_reference": f"r{i}"})
            for i in range(count)
        )
        draft = batch_draft_create(
            user=user,
            connection_id=connection.pk,
            model_id="gateway-model",
            source=BatchInput(kind="jsonl", stream=utf8_lines(lines)),
        )
        print(batch_confirm(user=user, batch_id=draft.pk).pk)
    elif command == "status":
        batch = Batch.objects.get(pk=int(sys.argv[2]))
        states = dict(batch.items.values_list("state").annotate(n=Count("id")).values_list("state", "n"))
        per_item = {
            item.pk: UsageRecord.objects.filter(source__startswith=f"batch-item:{item.pk}:").count()
            for item in batch.items.all()
        }
        linked = batch.items.filter(usage_record__isnull=False).count()
        print(
            json.dumps(
                {
                    "status": batch.status,
                    "states": states,
                    "records_per_item": sorted(set(per_item.values())),
                    "records": UsageRecord.objects.count(),
                    "linked": linked,
                }
            )
        )


if __name__ == "__main__":
    main()
