"""The seals of a team's routing decisions (issue 37, `usage.routing_seals`): a hash chain of its
own per team, apart from the audit chain (`accounts.chain`), because it grows with the traffic.

A `decision` entry seals one record's routing decision a minute or so after the request: the
record's id, request id and time, and a salted digest of the decision (never the decision or the
prompt). A `retention` or `erasure` entry says which sealed decisions a run deleted or rewrote,
so the verifier tells "removed by the team's own rules" from "tampered with".
"""

from __future__ import annotations

from django.db import models

from playground.accounts.models import Team


class SealKind(models.TextChoices):
    DECISION = "decision", "A routing decision sealed"
    RETENTION = "retention", "Sealed decisions deleted by retention"
    ERASURE = "erasure", "Sealed decisions rewritten by an end user's erasure"


class RoutingSeal(models.Model):
    """One link. Its content (hashed into `digest`) is the team, the kind and, for a decision,
    the record's id, request id and time and `decision_digest`; for a run, `detail` (what it
    removed: counts and record ids). `salt` is not content: a run that removes a decision
    blanks it, so the old digest can no longer be matched to a guess of what the decision said
    (an erased end user's id); the chain stays whole."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="+")
    seq = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=10, choices=SealKind.choices)
    # The sealed record (not a foreign key: a sealed record may be deleted, its seal stays).
    record_id = models.BigIntegerField(null=True, blank=True)
    request_id = models.UUIDField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_digest = models.CharField(max_length=64, blank=True)
    salt = models.CharField(max_length=64, blank=True)
    detail = models.JSONField(null=True, blank=True)
    sealed_at = models.DateTimeField()
    digest = models.CharField(max_length=64)
    prev = models.CharField(max_length=64)

    class Meta:
        ordering = ["team", "seq"]
        constraints = [models.UniqueConstraint(fields=["team", "seq"], name="routing_seal_place_unique")]
        indexes = [models.Index(fields=["team", "record_id"], name="routing_seal_team_record")]

    def __str__(self) -> str:
        return f"routing seal {self.seq} of team {self.team_id} ({self.kind})"


class RoutingSealChain(models.Model):
    """The head of a team's seal chain (length, last hash), locked by every append, and how far
    the sealer has come: every routed record created before `sealed_until` is sealed."""

    team = models.OneToOneField(Team, on_delete=models.CASCADE, primary_key=True, related_name="+")
    length = models.PositiveBigIntegerField(default=0)
    head = models.CharField(max_length=64, blank=True)
    sealed_until = models.DateTimeField(null=True, blank=True)
    last_sealed_at = models.DateTimeField(null=True, blank=True)  # the last run that sealed any

    def __str__(self) -> str:
        return f"routing seal chain of team {self.team_id}: {self.length} entries"
