"""Re-encrypt every stored provider token under the current FIELD_ENCRYPTION_KEY."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from playground.providers.models import ProviderConnection
from playground.providers.secrets import token_rotate


class Command(BaseCommand):
    help = "After setting a new FIELD_ENCRYPTION_KEY (old one in FIELD_ENCRYPTION_KEY_PREVIOUS)."

    def handle(self, *args: Any, **options: Any) -> None:
        rotated = 0
        for connection in ProviderConnection.objects.exclude(token_ciphertext=""):
            connection.token_ciphertext = token_rotate(connection.token_ciphertext)
            connection.save(update_fields=["token_ciphertext"])
            rotated += 1
        self.stdout.write(f"Re-encrypted {rotated} token(s).")
