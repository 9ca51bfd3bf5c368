"""Reading Prometheus text as a scraper does, for the metrics tests."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from playground.lib.metrics import metrics_exposition

type SampleKey = tuple[str, frozenset[tuple[str, str]]]


@dataclass(frozen=True)
class Scrape:
    """Every sample of one scrape, by its name and labels."""

    samples: dict[SampleKey, float]

    @classmethod
    def parse(cls, text: str) -> Scrape:
        return cls(
            {
                (sample.name, frozenset(sample.labels.items())): sample.value
                for family in text_string_to_metric_families(text)
                for sample in family.samples
            }
        )

    def value(self, name: str, **labels: str) -> float:
        """The sample with exactly these labels; 0 when there is none (a counter not yet counted)."""
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def total(self, name: str, **labels: str) -> float:
        """The sum of the samples of `name` whose labels include these."""
        wanted = set(labels.items())
        return sum(
            value for (sample, found), value in self.samples.items() if sample == name and wanted <= found
        )

    def label_sets(self, name: str) -> list[dict[str, str]]:
        return [dict(found) for sample, found in self.samples if sample == name]


def scrape_counters() -> Scrape:
    """This test process's counters (in its own multiprocess folder, `tests/settings.py`)."""
    return Scrape.parse(metrics_exposition().decode())
