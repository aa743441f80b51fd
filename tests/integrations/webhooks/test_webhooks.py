"""The shared webhook pieces: Standard Webhooks signatures (the specification's published test
vector, and a receiver verifying with the reference library), secrets, the address policy of
the cloud (SSRF) and the retry rule."""

from __future__ import annotations

import ipaddress
import socket
import time
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from farmkit.backoff import Backoff
from integrations.webhooks import (
    AddressPolicy,
    Attempt,
    DeliveryPolicy,
    DueDelivery,
    SecretError,
    TargetRefused,
    WebhookSender,
    check_secret,
    check_target,
    new_secret,
    open_session,
    signed_headers,
    url_problem,
)
from integrations.webhooks.deliverer import verdict_of
from integrations.webhooks.signing import sign
from integrations.webhooks.targets import GuardedResolver
from tests.support.webhook_receiver import WebhookReceiver


def test_the_signature_is_the_specifications_test_vector() -> None:
    # Standard Webhooks specification, "Verifying webhooks": the published example.
    assert (
        sign(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            b'{"test": 2432232314}',
        )
        == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    )


def test_a_receiver_verifies_our_headers_with_the_reference_library() -> None:
    secret = new_secret()
    body = '{"type":"alert.raised","data":{"value":"35 °C"}}'.encode()
    headers = signed_headers(secret, "d3b0c442-98fc-4c1c-b3f5-5d2a1a3b1c55", int(time.time()), body)
    assert Webhook(secret).verify(body, headers) == {
        "type": "alert.raised",
        "data": {"value": "35 °C"},
    }
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body.replace(b"35", b"36"), headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, headers)


def test_secrets_are_whsec_and_base64_of_24_to_64_bytes() -> None:
    secret = new_secret()
    assert check_secret(secret) == secret and secret != new_secret()
    check_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    for bad in ("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_short", "whsec_not base64!", "whsec_"):
        with pytest.raises(SecretError):
            check_secret(bad)


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.10",
        "169.254.169.254",
        "0.0.0.0",
        "224.0.0.1",
        "100.64.0.1",
        "::1",
        "fe80::1",
        "fc00::1",
        "::",
        "ff02::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        # IPv6 forms carrying a non-public IPv4 address (issue 24): NAT64, local-use NAT64 (its
        # /48 and /96 layouts), 6to4, Teredo (server; client, stored inverted), IPv4-compatible.
        "64:ff9b::7f00:1",
        "64:ff9b::a00:1",
        "64:ff9b:1:7f00:0:100::",
        "64:ff9b:1::7f00:1",
        "2002:7f00:1::",
        "2002:c0a8:101::1",
        "2001:0:7f00:1::1",
        "2001:0:4136:e378:8000:63bf:80ff:fffe",
        "::127.0.0.1",
        "::10.0.0.1",
    ],
)
def test_the_cloud_policy_refuses_non_public_addresses(address: str) -> None:
    ip = ipaddress.ip_address(address)
    assert AddressPolicy(allow_private=False).refusal(ip) is not None
    assert AddressPolicy(allow_private=True).refusal(ip) is None


@pytest.mark.parametrize(
    "address",
    ["93.184.215.14", "8.8.8.8", "2606:4700::1111", "64:ff9b::808:808", "2002:808:808::1"],
)
def test_public_addresses_are_allowed(address: str) -> None:
    assert AddressPolicy(allow_private=False).refusal(ipaddress.ip_address(address)) is None


async def test_a_name_resolving_to_loopback_is_refused_and_a_literal_too() -> None:
    policy = AddressPolicy(allow_private=False)
    with pytest.raises(TargetRefused, match="may not reach") as refused:
        await check_target("http://localhost:8080/hook", policy, timeout_s=5)
    # What a name resolved to is not told (neither the address nor its kind).
    assert "127.0.0.1" not in str(refused.value) and "loopback" not in str(refused.value)
    with pytest.raises(TargetRefused, match="carries a loopback IPv4 address"):
        await check_target("http://[64:ff9b::7f00:1]/hook", policy, timeout_s=5)
    with pytest.raises(TargetRefused, match="private"):
        await check_target("https://10.0.0.7/hook", policy, timeout_s=5)
    with pytest.raises(TargetRefused, match="does not resolve"):
        await check_target("https://no-such-host.invalid/hook", policy, timeout_s=5)
    await check_target("http://localhost:8080/hook", AddressPolicy(True), timeout_s=5)
    await check_target("https://93.184.215.14/hook", policy, timeout_s=5)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://example.com/hook", None),
        ("http://10.0.0.5:8123/api/webhook/x?y=1", None),
        ("ftp://example.com/hook", "http or https"),
        ("https:///hook", "host"),
        ("https://me:secret@example.com/hook", "user name"),
        ("https://example.com/hook#part", "fragment"),
        ("https://example.com:99999/hook", "not a URL"),
        ("https://example.com/" + "x" * 3000, "at most"),
    ],
)
def test_url_form(url: str, problem: str | None) -> None:
    found = url_problem(url)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_failures_are_retried_with_backoff_for_the_window_then_failed() -> None:
    policy = DeliveryPolicy(retry=Backoff(10.0, 3600.0), retry_window_s=86_400.0)
    queued = datetime(2026, 1, 1, tzinfo=UTC)
    delivery = DueDelivery("d", "w", "http://x/", "whsec_x", "{}", 3, queued)
    failed = Attempt(False, 500, "HTTP 500")
    at = queued + timedelta(hours=1)
    retry = verdict_of(delivery, failed, at, policy, rand=lambda: 0.0)
    assert retry.status == "pending" and retry.next_attempt_at == at + timedelta(seconds=40)
    late = verdict_of(delivery, failed, queued + timedelta(hours=24), policy)
    assert late.status == "failed" and late.next_attempt_at is None
    ok = verdict_of(delivery, Attempt(True, 204), at, policy)
    assert ok.status == "delivered" and ok.status_code == 204
    # Equal jitter: every retry waits at least half its back-off, never more than the cap.
    far = DueDelivery("d", "w", "http://x/", "whsec_x", "{}", 40, queued)
    capped = verdict_of(far, failed, at, policy, rand=lambda: 0.999)
    assert capped.next_attempt_at is not None
    assert 1800 <= (capped.next_attempt_at - at).total_seconds() <= 3600


class _Answers(AbstractResolver):
    """A DNS server's answers, one list per lookup (a rebinding server changes its answer)."""

    def __init__(self, *answers: list[str]) -> None:
        self._answers = list(answers)

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        addresses = self._answers.pop(0)
        return [
            ResolveResult(hostname=host, host=a, port=port, family=family, proto=0, flags=0)
            for a in addresses
        ]

    async def close(self) -> None:
        return None


async def test_the_resolver_refuses_an_answer_holding_any_refused_address() -> None:
    strict = AddressPolicy(allow_private=False)
    guarded = GuardedResolver(strict, _Answers(["93.184.215.14"], ["93.184.215.14", "10.0.0.1"]))
    (first,) = await guarded.resolve("hooks.example.com", 443)
    assert first["host"] == "93.184.215.14"
    # The second lookup (a rebinding answer) is refused whole: nothing to connect to.
    with pytest.raises(TargetRefused, match="may not reach") as refused:
        await guarded.resolve("hooks.example.com", 443)
    assert "10.0.0.1" not in str(refused.value) and "private" not in str(refused.value)
    # An answer holding a NAT64 address of an internal host is refused too.
    nat64 = GuardedResolver(strict, _Answers(["64:ff9b::a00:1"]))
    with pytest.raises(TargetRefused):
        await nat64.resolve("hooks.example.com", 443)


async def test_a_post_to_a_name_resolving_to_loopback_never_leaves_under_the_cloud_policy() -> None:
    receiver = WebhookReceiver()
    await receiver.start()
    strict = AddressPolicy(allow_private=False)
    session = open_session(strict, connections=4)
    try:
        sender = WebhookSender(session, strict, timeout_s=5, user_agent="test")
        delivery = DueDelivery(
            "d1", "w1", receiver.url.replace("127.0.0.1", "localhost"), new_secret(), "{}", 0,
            datetime.now(UTC),
        )  # fmt: skip
        attempt = await sender.send(delivery)
        assert not attempt.ok and attempt.status_code is None
        assert attempt.error is not None and "target refused" in attempt.error
        literal = DueDelivery("d2", "w1", receiver.url, new_secret(), "{}", 0, datetime.now(UTC))
        attempt = await sender.send(literal)
        assert attempt.error is not None and "loopback" in attempt.error
        assert receiver.received == []
    finally:
        await session.close()
        await receiver.stop()
