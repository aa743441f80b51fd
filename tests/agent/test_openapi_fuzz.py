"""Schemathesis over the agent's own OpenAPI document: no 5xx on any generated input, and every
response conforms to the document (status code, content type, headers, body schema)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from integrations.home_assistant.fake import FakeHub
from tests.support.fake_hub_server import served_fake_hub
from tests.support.live_agent import LiveAgent, live_agent

CHECKS = (
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
)


@pytest.fixture(scope="module")
def running_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveAgent]:
    state: Path = tmp_path_factory.mktemp("fuzz")
    # The hub integration on, against the fake hub: its paths are fuzzed as served.
    with (
        served_fake_hub(FakeHub.sample("fuzz-token")) as hub_url,
        live_agent(
            state,
            login_failures_per_account=1_000_000,
            login_failures_per_address=1_000_000,
            home_automation_enabled=True,
            home_automation_url=hub_url,
            home_automation_token="fuzz-token",
        ) as agent,
    ):
        yield agent


@pytest.fixture(scope="module")
def agent_schema(running_agent: LiveAgent) -> Any:
    return schemathesis.openapi.from_url(running_agent.base_url + "/api/v1/openapi.json")


@pytest.fixture(scope="module")
def admin_token(running_agent: LiveAgent) -> dict[str, str]:
    return {"token": running_agent.login()}


def test_agent_conforms_to_its_openapi_document(
    agent_schema: Any, running_agent: LiveAgent, admin_token: dict[str, str]
) -> None:
    failures: dict[str, str] = {}
    operations = [result.ok() for result in agent_schema.get_all_operations()]
    assert len(operations) >= 8

    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=12,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def exercise(case: Any) -> None:
            headers = {"Authorization": f"Bearer {admin_token['token']}"}
            response = case.call(headers=headers)
            if response.status_code == 401 and operation.security:  # noqa: B023 (called in this iteration)
                # A generated logout or revocation ended the session: log in again.
                admin_token["token"] = running_agent.login()
            case.validate_response(response, checks=CHECKS)

        try:
            exercise()
        except Exception as err:  # collect every operation's failure, then report them all
            failures[operation.label] = f"{type(err).__name__}: {err}"[:2000]

    assert not failures, "\n\n".join(f"{label}\n{text}" for label, text in failures.items())
