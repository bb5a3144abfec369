"""``traces:`` for OpenTelemetry in talon.yaml: off by default, bad values named by their key,
the export URL, and header values masked in logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway import otel
from gateway.config import ConfigError, load_settings
from gateway.traces_settings import TracesSettings


def _load(tmp_path: Path, traces: str) -> object:
    config = tmp_path / "talon.yaml"
    config.write_text(f"traces:\n{traces}", encoding="utf-8")
    return load_settings(config)


def test_spans_are_off_unless_an_endpoint_is_configured() -> None:
    assert TracesSettings().otlp_endpoint is None
    assert otel.install(TracesSettings()) is False
    assert not otel.enabled() and otel.traceparent() is None and otel.current_trace_id() is None


@pytest.mark.parametrize(
    ("traces", "key", "fix"),
    [
        ("  otlp_endpoint: 127.0.0.1:4318\n", "traces.otlp_endpoint", "http://127.0.0.1:4318"),
        ("  otlp_endpoint: ftp://collector\n", "traces.otlp_endpoint", "http(s) URL"),
        ("  sample_ratio: 1.5\n", "traces.sample_ratio", "1"),
        ("  service_name: ''\n", "traces.service_name", "at least 1"),
        ("  headers: [a, b]\n", "traces.headers", "mapping"),
        ("  otlp_endpiont: http://127.0.0.1:4318\n", "otlp_endpiont", "otlp_endpoint"),
    ],
)
def test_an_invalid_setting_names_its_key_and_the_fix(
    tmp_path: Path, traces: str, key: str, fix: str
) -> None:
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, traces)
    assert key in str(err.value) and fix in str(err.value)


def test_a_valid_block_loads_and_its_header_values_are_masked_in_logs(tmp_path: Path) -> None:
    settings = _load(
        tmp_path,
        "  otlp_endpoint: http://127.0.0.1:4318\n  service_name: talon-eu\n  sample_ratio: 0.25\n"
        "  headers: {authorization: Bearer s3cret-token}\n",
    )
    traces = settings.traces  # type: ignore[attr-defined]
    assert (traces.service_name, traces.sample_ratio) == ("talon-eu", 0.25)
    assert "Bearer s3cret-token" in settings.secrets()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [
        ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
        ("http://127.0.0.1:4318/", "http://127.0.0.1:4318/v1/traces"),
        ("https://otel.example.internal/custom/path", "https://otel.example.internal/custom/path"),
    ],
)
def test_the_traces_path_is_added_to_a_bare_endpoint(endpoint: str, url: str) -> None:
    assert otel.traces_url(endpoint) == url
