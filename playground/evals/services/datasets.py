"""Dataset writes: every edit (an upload confirmed, an item added or removed) makes a new version.

Rows are never changed: an added item is a new row with `added_in` = the new version, a removed
one gets `removed_in`; so an experiment on version N reads exactly what N held, whatever came
after. An upload with bad lines stores its good items unconfirmed (`upload` set, no version)
until the user confirms them or discards the upload.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from playground.accounts.permissions import require_run_role
from playground.batches.inputs import LineError
from playground.evals.models import Dataset, DatasetItem, DatasetUpload, DatasetVersion
from playground.evals.selectors import dataset_get, dataset_upload_get
from playground.evals.uploads import ItemFields, csv_item_fields, jsonl_item_fields

INSERT_CHUNK = 1_000
MAX_REPORTED_ERRORS = 50


class DatasetNotFound(Exception):
    """No dataset (or upload) with that id in the user's teams (answered as 404)."""


def dataset_create(*, user: User, team_id: int, name: str) -> Dataset:
    require_run_role(user=user, team_id=team_id)
    name = name.strip()[:200]
    if not name:
        raise ValidationError({"name": "Give the dataset a name."})
    try:
        with transaction.atomic():
            return Dataset.objects.create(team_id=team_id, name=name, created_by=user)
    except IntegrityError:
        raise ValidationError({"name": f"The team already has a dataset named {name!r}."}) from None


@dataclass(frozen=True)
class UploadResult:
    """A clean upload made `version`; one with bad lines waits in `upload` for the user's word."""

    version: DatasetVersion | None
    upload: DatasetUpload | None


def dataset_upload(
    *, user: User, dataset_id: int, file_name: str, kind: str, stream: IO[bytes]
) -> UploadResult:
    """Read every line; keep the good items. With no bad line they are the next version at once;
    otherwise they wait in a `DatasetUpload` listing the bad lines by number. A file with no good
    item is refused (`ValidationError`) and nothing is stored."""
    dataset = _dataset_for_run(user, dataset_id)
    lines = csv_item_fields(stream) if kind == "csv" else jsonl_item_fields(stream)
    with transaction.atomic():
        upload = DatasetUpload.objects.create(dataset=dataset, file_name=file_name[:200], created_by=user)
        errors: list[LineError] = []
        upload.item_count = _items_store(dataset, _good(lines, errors), upload=upload)
        upload.error_count = len(errors)
        upload.errors = [{"line": e.line, "message": e.message} for e in errors[:MAX_REPORTED_ERRORS]]
        if not upload.item_count:  # raising rolls the upload back
            first = f" {errors[0]}" if errors else ""
            raise ValidationError({"file": f"The file has no item that can be kept.{first}"})
        upload.save()
        if not errors:
            return UploadResult(version=_upload_confirm(user, upload), upload=None)
    return UploadResult(version=None, upload=upload)


def dataset_upload_confirm(*, user: User, upload_id: int) -> DatasetVersion:
    """Keep an upload's good items: they become the dataset's next version."""
    upload = _upload_for_run(user, upload_id)
    with transaction.atomic():
        return _upload_confirm(user, upload)


def dataset_upload_discard(*, user: User, upload_id: int) -> None:
    _upload_for_run(user, upload_id).delete()  # its waiting items go with it


def dataset_item_add(*, user: User, dataset_id: int, fields: ItemFields) -> DatasetVersion:
    return dataset_items_add(user=user, dataset_id=dataset_id, items=[fields], change="Added an item by hand")


def dataset_items_add(*, user: User, dataset_id: int, items: list[ItemFields], change: str) -> DatasetVersion:
    """`items` as the dataset's next version, `change` saying where they came from."""
    dataset = _dataset_for_run(user, dataset_id)
    with transaction.atomic():
        version = _next_version(dataset, user, added=len(items), removed=0, change=change)
        _items_store(dataset, ((0, fields) for fields in items), added_in=version.number)
    return version


def dataset_item_remove(*, user: User, dataset_id: int, item_id: int) -> DatasetVersion:
    dataset = _dataset_for_run(user, dataset_id)
    with transaction.atomic():
        locked = Dataset.objects.select_for_update().get(pk=dataset.pk)
        item = DatasetItem.objects.filter(
            pk=item_id, dataset=locked, added_in__isnull=False, removed_in__isnull=True
        ).first()
        if item is None:
            raise DatasetNotFound(item_id)
        version = _next_version(locked, user, added=0, removed=1, change=f"Removed item {item_id}")
        DatasetItem.objects.filter(pk=item.pk).update(removed_in=version.number)
    return version


def _upload_confirm(user: User, upload: DatasetUpload) -> DatasetVersion:
    dataset = Dataset.objects.select_for_update().get(pk=upload.dataset_id)
    refused = f", {upload.error_count} bad line(s) left out" if upload.error_count else ""
    version = _next_version(
        dataset,
        user,
        added=upload.item_count,
        removed=0,
        change=f"Uploaded {upload.file_name}: {upload.item_count} item(s){refused}",
    )
    DatasetItem.objects.filter(upload=upload).update(added_in=version.number, upload=None)
    upload.delete()
    return version


def _next_version(dataset: Dataset, user: User, *, added: int, removed: int, change: str) -> DatasetVersion:
    """The next version, under the dataset's row lock (two edits never take one number)."""
    locked = Dataset.objects.select_for_update().get(pk=dataset.pk)
    previous = locked.versions.filter(number=locked.version).values_list("item_count", flat=True).first() or 0
    locked.version += 1
    locked.save(update_fields=["version"])
    dataset.version = locked.version
    return DatasetVersion.objects.create(
        dataset=locked,
        number=locked.version,
        item_count=previous + added - removed,
        change=change[:300],
        created_by=user,
    )


def _good(
    lines: Iterable[tuple[int, ItemFields | LineError]], errors: list[LineError]
) -> Iterator[tuple[int, ItemFields]]:
    for number, result in lines:
        if isinstance(result, LineError):
            errors.append(result)
        else:
            yield number, result


def _items_store(
    dataset: Dataset,
    items: Iterable[tuple[int, ItemFields]],
    *,
    upload: DatasetUpload | None = None,
    added_in: int | None = None,
) -> int:
    count, chunk = 0, []
    for line, fields in items:
        chunk.append(
            DatasetItem(
                dataset=dataset,
                upload=upload,
                added_in=added_in,
                line=line or None,
                input=fields.input,
                messages=fields.messages,
                variables=fields.variables,
                expected=fields.expected,
                metadata=fields.metadata,
            )
        )
        count += 1
        if len(chunk) >= INSERT_CHUNK:
            DatasetItem.objects.bulk_create(chunk)
            chunk = []
    DatasetItem.objects.bulk_create(chunk)
    return count


def _dataset_for_run(user: User, dataset_id: int) -> Dataset:
    dataset = dataset_get(user=user, dataset_id=dataset_id)
    if dataset is None:
        raise DatasetNotFound(dataset_id)
    require_run_role(user=user, team_id=dataset.team_id)
    return dataset


def _upload_for_run(user: User, upload_id: int) -> DatasetUpload:
    upload = dataset_upload_get(user=user, upload_id=upload_id)
    if upload is None:
        raise DatasetNotFound(upload_id)
    require_run_role(user=user, team_id=upload.dataset.team_id)
    return upload
