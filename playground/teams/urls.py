from __future__ import annotations

from django.urls import URLPattern, path

from playground.teams.views import (
    alerts,
    api_keys,
    audit,
    budgets,
    catalogue,
    connections,
    data,
    erasure,
    joining,
    members,
    retention,
    routing,
)

app_name = "teams"
urlpatterns: list[URLPattern] = [
    path("", members.team_home_view, name="home"),
    path("join/<str:token>/", joining.join_view, name="join"),
    path("join/<str:token>/signup/", joining.join_signup_view, name="join-signup"),
    path("<int:team_id>/members/", members.members_view, name="members"),
    path("<int:team_id>/invitations/", members.invitation_create_view, name="invitation-create"),
    path(
        "<int:team_id>/invitations/<int:invitation_id>/revoke/",
        members.invitation_revoke_view,
        name="invitation-revoke",
    ),
    path("<int:team_id>/members/<int:membership_id>/role/", members.member_role_view, name="member-role"),
    path(
        "<int:team_id>/members/<int:membership_id>/remove/", members.member_remove_view, name="member-remove"
    ),
    path(
        "<int:team_id>/members/<int:membership_id>/make-owner/",
        members.ownership_transfer_view,
        name="ownership-transfer",
    ),
    path("<int:team_id>/leave/", members.team_leave_view, name="leave"),
    path("<int:team_id>/connections/", connections.connections_view, name="connections"),
    path("<int:team_id>/connections/new/", connections.connection_create_view, name="connection-create"),
    path(
        "<int:team_id>/connections/<int:connection_id>/",
        connections.connection_edit_view,
        name="connection-edit",
    ),
    path(
        "<int:team_id>/connections/<int:connection_id>/delete/",
        connections.connection_delete_view,
        name="connection-delete",
    ),
    path(
        "<int:team_id>/connections/<int:connection_id>/test/",
        connections.connection_test_view,
        name="connection-test",
    ),
    path("<int:team_id>/alerts/", alerts.alerts_view, name="alerts"),
    path("<int:team_id>/alerts/<int:destination_id>/test/", alerts.alert_test_view, name="alert-test"),
    path(
        "<int:team_id>/alerts/<int:destination_id>/delete/",
        alerts.alert_destination_delete_view,
        name="alert-delete",
    ),
    path("<int:team_id>/catalogue/", catalogue.catalogue_view, name="catalogue"),
    path("<int:team_id>/catalogue/overrides/", catalogue.override_create_view, name="override-create"),
    path(
        "<int:team_id>/catalogue/overrides/<int:card_id>/delete/",
        catalogue.override_delete_view,
        name="override-delete",
    ),
    path("<int:team_id>/catalogue/cards/", catalogue.global_card_create_view, name="card-create"),
    path("<int:team_id>/budgets/", budgets.budgets_view, name="budgets"),
    path("<int:team_id>/budgets/unpriced/", budgets.budget_unpriced_view, name="budget-unpriced"),
    path(
        "<int:team_id>/budgets/members/<int:membership_id>/", budgets.member_budget_view, name="member-budget"
    ),
    path("<int:team_id>/api-keys/", api_keys.api_keys_view, name="api-keys"),
    path("<int:team_id>/api-keys/new/", api_keys.api_key_create_view, name="api-key-create"),
    path("<int:team_id>/api-keys/<int:key_id>/", api_keys.api_key_edit_view, name="api-key-edit"),
    path("<int:team_id>/api-keys/<int:key_id>/revoke/", api_keys.api_key_revoke_view, name="api-key-revoke"),
    path("<int:team_id>/routing/", routing.routing_view, name="routing"),
    path("<int:team_id>/routing/dry-run/", routing.routing_dry_run_view, name="routing-dry-run"),
    path("<int:team_id>/routing/schema.json", routing.routing_schema_view, name="routing-schema"),
    path("<int:team_id>/data/", data.data_view, name="data"),
    path("<int:team_id>/data/retention/", retention.retention_view, name="data-retention"),
    path("<int:team_id>/data/erase-end-user/", erasure.end_user_erase_view, name="data-erase"),
    path("<int:team_id>/audit/", audit.audit_view, name="audit"),
]
