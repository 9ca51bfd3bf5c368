"""Reads of datasets and experiments, always scoped to the acting user's teams (else None: a 404)."""

from __future__ import annotations

from django.core.paginator import Page, Paginator
from django.db.models import Q, QuerySet

from playground.accounts.selectors import AnyUser
from playground.evals.models import Dataset, DatasetItem, DatasetUpload, Experiment

ITEMS_PER_PAGE = 50


def dataset_list(*, user: AnyUser) -> QuerySet[Dataset]:
    if not user.is_authenticated:
        return Dataset.objects.none()
    return Dataset.objects.filter(team__memberships__user_id=user.pk).select_related("team")


def dataset_get(*, user: AnyUser, dataset_id: int) -> Dataset | None:
    return dataset_list(user=user).filter(pk=dataset_id).first()


def dataset_upload_get(*, user: AnyUser, upload_id: int) -> DatasetUpload | None:
    return DatasetUpload.objects.filter(pk=upload_id, dataset__in=dataset_list(user=user)).first()


def dataset_version_items(*, dataset: Dataset, version: int) -> QuerySet[DatasetItem]:
    """The items of version `version`, in the order experiments send them (by id)."""
    return DatasetItem.objects.filter(
        Q(removed_in__isnull=True) | Q(removed_in__gt=version), dataset=dataset, added_in__lte=version
    ).order_by("id")


def dataset_items_page(*, dataset: Dataset, version: int, page: int | str | None) -> Page[DatasetItem]:
    """One page of a version's items: a COUNT and one LIMIT/OFFSET query, never the whole dataset."""
    paginator = Paginator(dataset_version_items(dataset=dataset, version=version), ITEMS_PER_PAGE)
    return paginator.get_page(page)


def experiment_list(*, user: AnyUser) -> QuerySet[Experiment]:
    if not user.is_authenticated:
        return Experiment.objects.none()
    return Experiment.objects.filter(team__memberships__user_id=user.pk).select_related("team", "dataset")


def experiment_get(*, user: AnyUser, experiment_id: int) -> Experiment | None:
    return experiment_list(user=user).filter(pk=experiment_id).first()


MAX_ID_DIGITS = 18  # a bigint's 19th digit could overflow it: such a value is no id of ours


def query_id(value: str) -> int | None:
    """A database id given in a query string, or None for anything else (never an overflow)."""
    return int(value) if value.isdigit() and len(value) <= MAX_ID_DIGITS else None
