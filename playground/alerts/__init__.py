"""Alerts beyond e-mail: a team's destinations (Slack, Microsoft Teams, signed webhooks), the events
worth telling the on-call (budget thresholds, a failing connection, a spend anomaly, a cache hit ratio
drop), and their deliveries, retried by Celery and logged (issue 41)."""
