"""`farm-agent pair`: make the sync key pair and redeem a pairing code at the cloud."""

from __future__ import annotations

import base64
from pathlib import Path

import aiohttp
from cryptography.hazmat.primitives import serialization

from agent.sync.link import CloudLink, sync_key_path
from protocol.keyfile import load_or_create_private_key
from protocol.schemas.agents import PairRequest, PairResult

__all__ = ["PairingFailed", "pair"]

_TIMEOUT_S = 30.0


class PairingFailed(Exception):
    """The cloud refused the code, or could not be reached."""


async def pair(cloud_url: str, code: str, state_dir: Path) -> CloudLink:
    """Register this agent's public key with the cloud and save the link."""
    key = load_or_create_private_key(sync_key_path(state_dir))
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    request = PairRequest(code=code, public_key=base64.urlsafe_b64encode(raw).rstrip(b"=").decode())
    url = cloud_url.rstrip("/") + "/api/v1/agents/pair"
    timeout = aiohttp.ClientTimeout(total=_TIMEOUT_S)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.post(url, json=request.model_dump()) as resp,
        ):
            body = await resp.read()
            if resp.status != 200:
                raise PairingFailed(
                    f"cloud answered {resp.status}: {body[:300].decode(errors='replace')}"
                )
    except (aiohttp.ClientError, TimeoutError) as err:
        raise PairingFailed(f"cannot reach {url}: {err}") from err
    result = PairResult.model_validate_json(body)
    link = CloudLink(
        cloud_url=cloud_url.rstrip("/"),
        agent_id=result.agent_id,
        cloud_issuer=result.cloud_issuer,
        cloud_public_key=result.cloud_public_key,
    )
    link.save(state_dir)
    return link
