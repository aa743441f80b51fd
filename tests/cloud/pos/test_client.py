"""The provider client's rules, against the fake: Square-Version and Bearer on every request,
a slow provider is a timeout retried and then reported, a 401 is never retried, and the back-off
between tries doubles up to a cap."""

from __future__ import annotations

import aiohttp
import pytest

from cloud.pos_provider.client import SQUARE_VERSION, PosClient, RetryPolicy
from cloud.pos_provider.errors import ProviderAuthError, ProviderUnavailable
from cloud.pos_provider.fake import Fault
from cloud.pos_provider.resources import RESOURCES
from tests.cloud.pos.conftest import TOKEN, FakeProvider


async def no_sleep(_: float) -> None:
    return None


async def test_a_silent_provider_times_out_and_is_retried_then_reported(
    fake: FakeProvider,
) -> None:
    fake.merchant.delay_s = 1.0
    async with aiohttp.ClientSession() as session:
        client = PosClient(
            session, fake.url, TOKEN, retry=RetryPolicy(attempts=3, timeout_s=0.1), sleep=no_sleep
        )
        with pytest.raises(ProviderUnavailable, match="did not answer in time"):
            await client.locations()
    assert fake.merchant.requests.count(("GET", "/v2/locations")) == 3


async def test_a_refused_token_is_not_retried(fake: FakeProvider) -> None:
    async with aiohttp.ClientSession() as session:
        client = PosClient(session, fake.url, "wrong", sleep=no_sleep)
        with pytest.raises(ProviderAuthError) as caught:
            await client.page(RESOURCES["customers"])
    assert (caught.value.status, caught.value.code) == (401, "UNAUTHORIZED")
    assert "wrong" not in str(caught.value) and "wrong" not in caught.value.describe()
    assert len(fake.merchant.requests) == 1


async def test_rate_limits_are_retried_until_the_provider_answers(fake: FakeProvider) -> None:
    fake.merchant.faults.append(Fault("/v2/customers", 429, times=3))
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async with aiohttp.ClientSession() as session:
        client = PosClient(
            session,
            fake.url,
            TOKEN,
            retry=RetryPolicy(attempts=6, initial_s=1.0, max_s=3.0),
            sleep=sleep,
            rng=lambda: 1.0,
        )
        page = await client.page(RESOURCES["customers"])
    assert len(page.items) == 5
    assert slept == [1.0, 2.0, 3.0]  # doubling, capped (the jitter's top with rng 1.0)


async def test_every_request_names_the_api_version(fake: FakeProvider) -> None:
    seen: list[str] = []

    async def on_request_start(
        _: aiohttp.ClientSession, __: object, params: aiohttp.TraceRequestStartParams
    ) -> None:
        seen.append(params.headers.get("Square-Version", ""))

    trace = aiohttp.TraceConfig()
    trace.on_request_start.append(on_request_start)
    async with aiohttp.ClientSession(trace_configs=[trace]) as session:
        await PosClient(session, fake.url, TOKEN).locations()
    assert seen == [SQUARE_VERSION]
