import pytest

from traincard_otel._config import resolve
from traincard_otel.exceptions import ConfigError


def test_argument_beats_env_beats_default() -> None:
    assert resolve({}, {}).flush_interval_s == 2.0
    assert resolve({}, {"TRAINCARD_FLUSH_INTERVAL": "5"}).flush_interval_s == 5.0
    assert resolve({"flush_interval_s": 1.5}, {"TRAINCARD_FLUSH_INTERVAL": "5"}).flush_interval_s == 1.5


def test_bad_env_value_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="TRAINCARD_FLUSH_INTERVAL"):
        resolve({}, {"TRAINCARD_FLUSH_INTERVAL": "soon"})
    with pytest.raises(ConfigError, match="greater than 0"):
        resolve({}, {"TRAINCARD_BUFFER_CAP": "0"})
    with pytest.raises(ConfigError, match="TRAINCARD_REPORT_RANKS"):
        resolve({}, {"TRAINCARD_REPORT_RANKS": "some"})


def test_unknown_argument_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown setting"):
        resolve({"flush_every": 1}, {})


def test_exporter_lists_follow_the_spec() -> None:
    s = resolve({}, {"OTEL_TRACES_EXPORTER": " otlp , console", "OTEL_LOGS_EXPORTER": "NONE"})
    assert s.traces_exporters == ("otlp", "console")
    assert s.logs_exporters == ()
    with pytest.raises(ConfigError, match="whole value"):
        resolve({}, {"OTEL_METRICS_EXPORTER": "console,none"})


def test_sdk_disabled_cannot_be_undone_by_an_argument() -> None:
    assert resolve({"sdk_disabled": False}, {"OTEL_SDK_DISABLED": "true"}).sdk_disabled is True
