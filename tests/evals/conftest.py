"""Evaluation fixtures: two preset versions on the embedded engine and a small dataset."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.conf import LazySettings

from playground.batches.models import Batch
from playground.batches.services.step import batch_step_run
from playground.catalog.seed import ENGINE_MODEL_ID
from playground.evals.models import Dataset, ExperimentTarget
from playground.evals.services.datasets import dataset_create, dataset_item_add
from playground.evals.services.scoring import target_score
from playground.evals.uploads import ItemFields
from playground.presets.models import PresetVersion
from playground.presets.services import connection_ref, preset_version_save
from playground.presets.setup import PresetSetup
from playground.providers.models import ProviderConnection
from tests.support.actors import Actors

QUESTIONS = [
    ("What is the capital of France?", "Paris"),
    ("What colour is the sky on a clear day?", "blue"),
    ("How many legs does a cat have?", "4"),
]


@pytest.fixture
def engine(settings: LazySettings, served_engine: ProviderConnection) -> ProviderConnection:
    settings.BATCH_POLL_FIRST_SECONDS = 0.2
    settings.BATCH_POLL_MAX_SECONDS = 1.0
    return served_engine


@pytest.fixture
def two_versions(actors: Actors, engine: ProviderConnection) -> tuple[PresetVersion, PresetVersion]:
    """v1 answers in one word; v2 declares a {{tone}} variable the items fill."""

    def setup(system_prompt: str, variables: list[dict[str, Any]]) -> PresetSetup:
        return PresetSetup(
            connection=connection_ref(engine),
            model_id=ENGINE_MODEL_ID,
            system_prompt=system_prompt,
            variables=variables,
            parameters={"max_tokens": 6, "temperature": 0},
        )

    first = preset_version_save(
        user=actors.owner, team_id=actors.team.pk, setup=setup("Answer in one word.", []), name="Quiz"
    )
    second = preset_version_save(
        user=actors.owner,
        team_id=actors.team.pk,
        setup=setup("Answer in a {{tone}} way.", [{"name": "tone", "type": "text", "value": "plain"}]),
        preset_id=first.preset_id,
    )
    return first, second


@pytest.fixture
def quiz(actors: Actors) -> Dataset:
    dataset = dataset_create(user=actors.owner, team_id=actors.team.pk, name="Quiz")
    for question, answer in QUESTIONS:
        fields = ItemFields(input=question, expected=answer, variables={"tone": "terse"})
        dataset_item_add(user=actors.owner, dataset_id=dataset.pk, fields=fields)
    dataset.refresh_from_db()
    return dataset


def run_to_the_end(batch: Batch, *, timeout: float = 120) -> None:
    """The chain's steps, run here in turn as the worker would (with the chain's current token),
    each followed by the scoring of its experiment target's answers, as the worker does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        batch.refresh_from_db()
        countdown = batch_step_run(batch_id=batch.pk, token=batch.chain_token)
        for target_id in ExperimentTarget.objects.filter(batch=batch).values_list("pk", flat=True):
            while target_score(target_id=target_id):
                pass
        if countdown is None:
            return
        time.sleep(min(countdown, 0.5))
    raise AssertionError("the batch did not finish in time")
