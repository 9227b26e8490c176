"""Helpers of the operations tests: a worker with metrics on, a scrape over real HTTP."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine

from exchange import app as bootstrap
from exchange.dev.sitesim import SiteSimulator
from exchange.dev.testing import fast_settings, run_worker
from exchange.ops.metrics import Health, MetricsServer, PrometheusMetrics
from exchange.worker import Worker

TOKEN = "test-token"


def make_worker(db_url: str, engine: Engine, site: SiteSimulator, **overrides: Any) -> Worker:
    settings = fast_settings(db_url, site.url, **overrides)
    return bootstrap.worker(settings, engine, rng=random.Random(3))


def run(worker: Worker, coro_factory: Callable[[Worker], Any] | None = None) -> None:
    run_worker(worker, coro_factory)


@contextmanager
def served(
    worker: Worker, engine: Engine, **health: Any
) -> Iterator[tuple[PrometheusMetrics, MetricsServer]]:
    """The worker reports to fresh metrics, served on a free loopback port."""
    metrics = PrometheusMetrics()
    worker.metrics = metrics
    check = Health(metrics, engine, poll_interval=worker.settings.poll_interval, **health)
    with MetricsServer(metrics, check, host="127.0.0.1", port=0) as server:
        yield metrics, server


def get(url: str) -> httpx.Response:
    # trust_env=False: a proxy configured in the environment must not intercept loopback.
    return httpx.get(url, timeout=10, trust_env=False)


class Samples:
    """One scrape of /metrics, parsed with prometheus_client's own parser."""

    def __init__(self, text: str) -> None:
        self.values: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                self.values[(sample.name, frozenset(sample.labels.items()))] = sample.value

    def __call__(self, name: str, **labels: str) -> float:
        key = (name, frozenset(labels.items()))
        if key not in self.values:
            raise AssertionError(f"no sample {name}{labels} in the scrape")
        return self.values[key]

    def by_label(self, name: str, label: str) -> dict[str, float]:
        return {
            dict(labels)[label]: value
            for (sample, labels), value in self.values.items()
            if sample == name and label in dict(labels)
        }


def scrape(server: MetricsServer) -> Samples:
    answer = get(f"{server.url}/metrics")
    assert 200 == answer.status_code
    assert answer.headers["content-type"].startswith("text/plain")
    return Samples(answer.text)
