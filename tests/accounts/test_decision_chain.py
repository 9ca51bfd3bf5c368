"""The team's chain of decision records (issue 37): audit events and routing policy versions,
each hashed with the one before; `audit_verify` finds a changed, deleted or slipped-in row."""

from __future__ import annotations

import threading

import pytest
from django.db import connections
from django.test import Client

from playground.accounts.chain import chain_verify, content_digest
from playground.accounts.models import AuditAction, AuditEvent, DecisionChain
from playground.providers.models import ProviderConnection
from playground.routing.chain import DECISION_KINDS, POLICY_VERSIONS
from playground.routing.models import RoutingPolicy
from playground.routing.services import routing_policy_save
from playground.teams.services.audit import audit
from tests.fakes.upstream import FakeUpstream
from tests.support.actors import Actors
from tests.support.commands import command_exit, sql
from tests.support.connections import WORKERS_TOKEN, workers_connection_for

POLICY = {"aliases": {"smart": {"connection": "Primary", "model": "@cf/moonshotai/kimi-k2.5"}}}


@pytest.fixture
def primary(actors: Actors, fake_upstream: FakeUpstream, catalogue: None) -> ProviderConnection:
    return workers_connection_for(actors.team, fake_upstream, name="Primary", token=WORKERS_TOKEN)


def _history(actors: Actors, primary: ProviderConnection) -> list[AuditEvent]:
    """Five audit events with a policy version between the second and the third."""
    team, owner = actors.team, actors.owner
    events = [audit(actor=owner, team=team, action=AuditAction.BUDGET_CHANGED, limit="10.00")]
    events.append(audit(actor=actors.admin, team=team, action=AuditAction.ROLE_CHANGED, target="teammate"))
    routing_policy_save(team=team, document=POLICY, user=owner, note="first")
    for target in ("agent", "reporter", "night"):
        events.append(
            audit(actor=owner, team=team, action=AuditAction.API_KEY_CREATED, target=target, rate=1.5)
        )
    return events


def _verify(team_id: int) -> tuple[int, str]:
    return command_exit("audit_verify", team=str(team_id))


@pytest.mark.django_db
def test_an_untouched_chain_verifies_with_its_length(actors: Actors, primary: ProviderConnection) -> None:
    _history(actors, primary)
    audit(actor=actors.outsider, team=actors.other_team, action=AuditAction.BUDGET_CHANGED)

    code, output = _verify(actors.team.pk)

    assert code == 0
    assert "intact, 6 entries" in output
    policy = RoutingPolicy.objects.get(team=actors.team)
    assert policy.chain_seq == 3  # one chain per team, across both kinds, in the order written
    assert DecisionChain.objects.get(team=actors.team).length == 6
    assert DecisionChain.objects.get(team=actors.other_team).length == 1


@pytest.mark.django_db
def test_a_row_changed_in_sql_is_found_at_that_row(actors: Actors, primary: ProviderConnection) -> None:
    events = _history(actors, primary)
    table = AuditEvent._meta.db_table
    sql(f"UPDATE {table} SET target = %s WHERE id = %s", "someone-else", events[1].pk)

    code, output = _verify(actors.team.pk)

    assert code == 1
    assert f"broken at entry 2 (audit event #{events[1].pk}): changed" in output
    assert "more problems" not in output  # the links after it still hold: only that row is reported


@pytest.mark.django_db
def test_a_row_rewritten_with_a_fresh_hash_is_found_by_the_next_link(
    actors: Actors, primary: ProviderConnection
) -> None:
    _history(actors, primary)
    policy = RoutingPolicy.objects.get(team=actors.team)
    table = RoutingPolicy._meta.db_table
    policy.note = "never said"
    digest = content_digest(POLICY_VERSIONS.content(policy))
    sql(f"UPDATE {table} SET note = %s, chain_digest = %s WHERE id = %s", policy.note, digest, policy.pk)

    status = chain_verify(team_id=actors.team.pk, kinds=DECISION_KINDS)

    assert not status.intact
    assert (status.breaks[0].what, status.breaks[0].seq) == ("changed", 3)
    assert status.breaks[0].entry == f"routing policy version #{policy.pk}"


@pytest.mark.django_db
def test_a_deleted_row_is_found_in_the_middle_and_at_the_end(
    actors: Actors, primary: ProviderConnection
) -> None:
    events = _history(actors, primary)
    table = AuditEvent._meta.db_table
    sql(f"DELETE FROM {table} WHERE id = %s", events[2].pk)  # place 4

    code, output = _verify(actors.team.pk)
    assert code == 1
    assert "broken at entry 4 (missing): deleted" in output

    sql(f"DELETE FROM {table} WHERE id = %s", events[4].pk)  # place 6, the newest
    status = chain_verify(team_id=actors.team.pk, kinds=DECISION_KINDS)
    assert [(problem.what, problem.seq) for problem in status.breaks] == [("deleted", 4), ("deleted", 6)]


@pytest.mark.django_db
def test_a_row_slipped_in_is_reported_as_inserted(actors: Actors, primary: ProviderConnection) -> None:
    _history(actors, primary)
    forged = AuditEvent.objects.create(team=actors.team, actor_name="ghost", action=AuditAction.MEMBER_JOINED)

    status = chain_verify(team_id=actors.team.pk, kinds=DECISION_KINDS)

    assert [(problem.what, problem.entry) for problem in status.breaks] == [
        ("inserted", f"audit event #{forged.pk}")
    ]
    assert "carries no link" in str(status)


@pytest.mark.django_db
def test_deleting_a_user_keeps_the_chain_intact(actors: Actors, primary: ProviderConnection) -> None:
    _history(actors, primary)
    actors.admin.delete()  # the events' actor becomes NULL; their actor_name, which is chained, stays

    assert chain_verify(team_id=actors.team.pk, kinds=DECISION_KINDS).intact


@pytest.mark.django_db
def test_the_audit_page_shows_the_chain_status(
    client: Client, actors: Actors, primary: ProviderConnection
) -> None:
    events = _history(actors, primary)
    client.force_login(actors.owner)
    page = client.get(f"/teams/{actors.team.pk}/audit/").content.decode()
    assert "Hash chain intact: 6 entries" in page

    table = AuditEvent._meta.db_table
    sql(f"UPDATE {table} SET detail = %s WHERE id = %s", '{"limit": "99.00"}', events[0].pk)
    page = client.get(f"/teams/{actors.team.pk}/audit/").content.decode()
    assert "Hash chain broken at entry 1" in page and "changed" in page


@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_keep_one_chain(actors: Actors) -> None:
    writers, each = 6, 15
    start = threading.Barrier(writers)
    failures: list[BaseException] = []

    def write(number: int) -> None:
        try:
            start.wait()
            for index in range(each):
                name = f"writer-{number}"
                audit(
                    actor=None, team=actors.team, action=AuditAction.BUDGET_CHANGED, actor_name=name, n=index
                )
        except BaseException as exc:  # reported below, with the other threads' failures
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=write, args=(number,)) for number in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert failures == []
    status = chain_verify(team_id=actors.team.pk, kinds=DECISION_KINDS)
    assert status.intact, str(status)
    assert status.entries == writers * each
    places = list(
        AuditEvent.objects.filter(team=actors.team).order_by("chain_seq").values_list("chain_seq", flat=True)
    )
    assert places == list(range(1, writers * each + 1))
