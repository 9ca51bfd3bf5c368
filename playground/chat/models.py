"""Conversations and their messages."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from playground.accounts.models import Team
from playground.providers.models import ProviderConnection


class Conversation(models.Model):
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="conversations")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations")
    connection = models.ForeignKey(ProviderConnection, null=True, on_delete=models.SET_NULL, related_name="+")
    model_id = models.CharField(max_length=200)
    title = models.CharField(max_length=200, blank=True)
    system_prompt = models.TextField(blank=True)
    # Sent as x-session-affinity when `use_affinity` is on, so the prompt prefix stays cached.
    affinity_key = models.CharField(max_length=120, blank=True)
    use_affinity = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"


class MessageRole(models.TextChoices):
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"


class Message(models.Model):
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=10, choices=MessageRole.choices)
    content = models.TextField(blank=True)
    reasoning = models.TextField(blank=True)
    # Set on assistant messages once the answer ends: the request's usage record.
    usage_record = models.OneToOneField(
        "usage.UsageRecord", null=True, blank=True, on_delete=models.SET_NULL, related_name="message"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:40]}"
