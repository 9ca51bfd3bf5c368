from __future__ import annotations

from django.apps import AppConfig


class GatewayConfig(AppConfig):
    name = "playground.gateway"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from playground.gateway.erasure import GatewayEraser
        from playground.usage import erasure

        erasure.erasers.register("gateway", GatewayEraser())
