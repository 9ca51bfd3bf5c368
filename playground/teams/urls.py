from __future__ import annotations

from django.urls import URLPattern, path

from playground.teams.views import members as views

app_name = "teams"
urlpatterns: list[URLPattern] = [
    path("", views.team_home_view, name="home"),
    path("join/<str:token>/", views.join_view, name="join"),
    path("join/<str:token>/signup/", views.join_signup_view, name="join-signup"),
    path("<int:team_id>/members/", views.members_view, name="members"),
    path("<int:team_id>/invitations/", views.invitation_create_view, name="invitation-create"),
    path(
        "<int:team_id>/invitations/<int:invitation_id>/revoke/",
        views.invitation_revoke_view,
        name="invitation-revoke",
    ),
    path("<int:team_id>/members/<int:membership_id>/role/", views.member_role_view, name="member-role"),
    path("<int:team_id>/members/<int:membership_id>/remove/", views.member_remove_view, name="member-remove"),
    path(
        "<int:team_id>/members/<int:membership_id>/make-owner/",
        views.ownership_transfer_view,
        name="ownership-transfer",
    ),
    path("<int:team_id>/leave/", views.team_leave_view, name="leave"),
    path("<int:team_id>/connections/", views.connections_view, name="connections"),
    path("<int:team_id>/connections/new/", views.connection_create_view, name="connection-create"),
    path(
        "<int:team_id>/connections/<int:connection_id>/", views.connection_edit_view, name="connection-edit"
    ),
    path(
        "<int:team_id>/connections/<int:connection_id>/delete/",
        views.connection_delete_view,
        name="connection-delete",
    ),
    path(
        "<int:team_id>/connections/<int:connection_id>/test/",
        views.connection_test_view,
        name="connection-test",
    ),
    path("<int:team_id>/catalogue/", views.catalogue_view, name="catalogue"),
    path("<int:team_id>/catalogue/overrides/", views.override_create_view, name="override-create"),
    path(
        "<int:team_id>/catalogue/overrides/<int:card_id>/delete/",
        views.override_delete_view,
        name="override-delete",
    ),
    path("<int:team_id>/catalogue/cards/", views.global_card_create_view, name="card-create"),
    path("<int:team_id>/budgets/", views.budgets_view, name="budgets"),
    path("<int:team_id>/budgets/unpriced/", views.budget_unpriced_view, name="budget-unpriced"),
    path(
        "<int:team_id>/budgets/members/<int:membership_id>/", views.member_budget_view, name="member-budget"
    ),
    path("<int:team_id>/audit/", views.audit_view, name="audit"),
]
