"""The store writer's retry schedule and the store specs it is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from traincard_otel._store import segment
from traincard_otel._store.backends import LocalBackend, MetaflowBackend, backend_from_spec
from traincard_otel._write.store.retry import BACKOFF_S, Backoff
from traincard_otel._write.store.writer import StoreWriter
from traincard_otel.exceptions import ConfigError


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_backoff_doubles_from_one_second_to_thirty_and_stays_there() -> None:
    clock = Clock()
    backoff = Backoff(clock=clock)
    waits = []
    for _ in range(9):
        backoff.failed()
        waits.append(backoff.next_at - clock.now)
    assert BACKOFF_S == (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)
    assert waits == [1, 2, 4, 8, 16, 30, 30, 30, 30]
    assert backoff.retrying and not backoff.due()
    clock.now += 30
    assert backoff.due()
    backoff.succeeded()
    assert not backoff.retrying and backoff.due() and backoff.delay_s() == 0


class Flaky(LocalBackend):
    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.down, self.calls = True, 0

    def write(self, name: str, data: bytes) -> None:
        self.calls += 1
        if self.down:
            raise ConnectionError("endpoint\nunreachable")
        super().write(name, data)


def test_scheduled_flushes_wait_for_the_backoff_and_an_explicit_flush_tries_at_once(tmp_path: Path) -> None:
    backend = Flaky(tmp_path)
    writer = StoreWriter(backend, attempt=0, rank=0, flush_interval_s=60)
    clock = Clock()
    writer.backoff = Backoff(clock=clock)
    writer.add(segment.metric_run("train", ["loss"], [1], [0.0], [1.0]))
    assert writer._flush(retry_now=False) is False  # first try: the store is down
    assert backend.calls == 1  # the state waits after a failed segment: one attempt per flush
    health = writer.store_health
    assert health["write_errors"] == 1 and health["retrying"] and health["pending_rows"] == 1
    assert health["last_error"] == "ConnectionError: endpoint unreachable"  # one line
    writer.add(segment.metric_run("train", ["loss"], [2], [0.0], [0.5]))
    assert writer._flush(retry_now=False) is False
    assert backend.calls == 1  # within the backoff: no attempt, the batch waits encoded
    assert writer.store_health["pending_rows"] == 2
    clock.now += 1.0
    assert writer._flush(retry_now=False) is False and backend.calls == 2  # due again: tried, failed
    assert writer.backoff.delay_s() == 2.0
    backend.down = False
    assert writer.flush_now() is True  # explicit: tried although the backoff runs
    health = writer.store_health
    assert health == {**health, "write_errors": 2, "pending_rows": 0, "retrying": False}
    assert sorted(p.name for p in tmp_path.rglob("seg-*")) == ["seg-00000001.jsonl", "seg-00000002.jsonl"]


@pytest.mark.parametrize(
    ("spec", "ds_type", "root", "prefix"),
    [
        ("s3://bucket/a/b", "s3", "s3://bucket", "a/b"),
        ("s3://bucket", "s3", "s3://bucket", ""),
        ("gs://bucket/a/", "gs", "gs://bucket", "a"),
        ("az://container/a/b", "azure", "container", "a/b"),
        ("metaflow://s3|s3://b/metaflow|F/1/s/2/traincard", "s3", "s3://b/metaflow", "F/1/s/2/traincard"),
    ],
)
def test_store_urls_name_a_metaflow_datastore(spec: str, ds_type: str, root: str, prefix: str) -> None:
    backend = backend_from_spec(spec)
    assert isinstance(backend, MetaflowBackend)
    assert (backend.ds_type, backend.ds_root, backend.prefix) == (ds_type, root, prefix)
    assert backend_from_spec(backend.spec).spec == backend.spec  # children get the same store


@pytest.mark.parametrize("spec", ["http://host/x", "s3://", "metaflow://s3|x"])
def test_bad_store_specs_say_what_is_accepted(spec: str) -> None:
    with pytest.raises(ConfigError, match="bad store spec"):
        backend_from_spec(spec)


def test_traincard_dir_takes_a_bucket_url(monkeypatch: pytest.MonkeyPatch) -> None:
    from traincard_otel._config import Settings
    from traincard_otel._write.store.where import resolve_backend

    monkeypatch.setenv("TRAINCARD_DIR", "s3://bucket/runs")
    monkeypatch.setenv("TRAINCARD_RUN_NAME", "r1")
    backend = resolve_backend(Settings(), None)
    assert isinstance(backend, MetaflowBackend)
    assert (backend.ds_type, backend.ds_root, backend.prefix) == ("s3", "s3://bucket", "runs/r1")


def test_s3_writes_are_one_attempt_bounded_by_our_timeouts_unless_the_user_set_theirs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The frozen-endpoint test runs with a user-set read timeout (to spend less time): the default
    bound is checked here, and that a user's key wins over ours while the others stay."""
    from metaflow import metaflow_config

    from traincard_otel._store.datastore_calls import CONNECT_TIMEOUT_S, READ_TIMEOUT_S, quick_s3_client

    monkeypatch.setattr(metaflow_config, "DATATOOLS_CLIENT_PARAMS", {"endpoint_url": "http://s3.local"})
    params = quick_s3_client()._s3_client_params
    assert params["endpoint_url"] == "http://s3.local"
    assert params["config"] == {
        "connect_timeout": CONNECT_TIMEOUT_S,
        "read_timeout": READ_TIMEOUT_S,
        "retries": {"total_max_attempts": 1, "mode": "standard"},
    }
    monkeypatch.setattr(metaflow_config, "DATATOOLS_CLIENT_PARAMS", {"config": {"read_timeout": 3.0}})
    config = quick_s3_client()._s3_client_params["config"]
    assert config["read_timeout"] == 3.0 and config["connect_timeout"] == CONNECT_TIMEOUT_S
    assert config["retries"]["total_max_attempts"] == 1
