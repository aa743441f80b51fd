"""Every place the agent's MQTT client reaches past aiomqtt's and paho-mqtt's public API.

aiomqtt 2.x runs paho-mqtt's ``Client`` (its private ``_client``) on the event loop. What the
agent needs and neither offers is done here, and only here, with paho's own internals:

- ``_handle_on_message(message)``: replaced per connection (:func:`receive_with`). paho's
  receive path calls it for every PUBLISH it decoded; paho's own matches the topic against
  per-filter callbacks (none here) under two locks, then calls aiomqtt's ``on_message``, which
  builds a message of its own for ``client.messages``. The agent takes paho's message straight
  into its queue.
- ``_packet_read()`` and ``_loop_rc_handle(rc)``: what paho's ``loop_read`` runs, one packet a
  call and its error handling (:func:`read_in_bursts`). aiomqtt's reader has paho read one
  packet per event-loop turn; the agent reads what the socket holds, up to a burst, per turn.
- ``_packet_queue(command, packet, mid, qos, info=None)`` and the ``_out_packet`` entries it
  makes (:func:`send_pubacks`, :func:`send_publishes`): bytes queued on the connection as one
  write. paho queues (and writes, a ``send`` each) one packet per PUBACK or PUBLISH; a commit
  settles hundreds of QoS 1 messages at once, and a relay flush publishes a state per series.
  ``_packet_write`` gives a queued PUBLISH entry of QoS 0 its ``info`` back once written (and
  calls ``on_publish`` with its ``mid``): the joined publishes carry an info of their own under
  mid 0, which paho never gives a message.
- ``_protocol``: MQTT 5 PUBLISH packets carry a properties length, 3.1.1 ones do not.
- aiomqtt's ``_client`` (paho's client), ``_connected`` and ``_disconnected`` (its futures for
  the CONNACK and the connection's end), ``_pending_subscribes`` and ``_pending_unsubscribes``
  (packet ids waited for).

paho-mqtt is pinned to the minor versions below in pyproject.toml; ``CHECKED_PAHO_VERSIONS`` are
the releases these internals were read in, and tests/agent/devices/test_paho_internals.py fails
on any other, and when an internal is gone or its signature changed. A new paho release is read
against this list (its ``client.py``: the methods above and ``_packet_write``) before it is
added.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import aiomqtt
import paho.mqtt.client as mqtt
from paho.mqtt.enums import MQTTErrorCode, MQTTProtocolVersion

from agent.devices.codec import OutgoingMessage

__all__ = [
    "CHECKED_PAHO_VERSIONS",
    "abandon",
    "disconnect",
    "ignore_late_acknowledgements",
    "manual_acks",
    "read_in_bursts",
    "receive_with",
    "send_pubacks",
    "send_publishes",
]

#: The paho-mqtt releases whose internals this module was checked against.
CHECKED_PAHO_VERSIONS = frozenset({"2.1.0", "2.2.0"})

_PUBACK = struct.Struct("!BBH")
_PUBACK_TYPE = 0x40
_PUBLISH_TYPE = 0x30
_RETAIN = 0x01
_TOPIC_LENGTH = struct.Struct("!H")
# A PUBLISH's remaining length: at most four 7-bit groups (MQTT 3.1.1 section 2.2.3).
_MAX_REMAINING = 268_435_455


def manual_acks(client: aiomqtt.Client) -> None:
    """Have paho leave QoS 1 acknowledgements to the agent (paho's public switch, reached
    through aiomqtt's private client: aiomqtt 2.5 has no option for it)."""
    client._client.manual_ack_set(True)


def receive_with(client: aiomqtt.Client, receive: Callable[[mqtt.MQTTMessage], None]) -> None:
    """Hand every PUBLISH that ``client`` receives to ``receive``, in place of paho's
    ``_handle_on_message``. An exception still ends the connection, as paho's does with
    ``suppress_exceptions`` off."""
    client._client._handle_on_message = receive  # type: ignore[method-assign,assignment]


def read_in_bursts(client: aiomqtt.Client, burst: int) -> None:
    """Read what the socket holds, up to ``burst`` packets, each time it is readable.

    aiomqtt's reader has paho read one packet per event-loop turn, so a backlog of telemetry
    took one turn a message, and a command's PUBACK or the state report confirming it waited
    behind all of it in the socket. Replaces aiomqtt's reader for this connection (same
    error handling: a failed read ends the connection); aiomqtt removes it when the socket
    closes.

    Packets are read with paho's ``_packet_read`` (what its ``loop_read`` runs, one packet a
    call, errors handed to its ``_loop_rc_handle`` the same way) until it finds the socket
    drained: one failed ``recv`` a burst, not a ``FIONREAD`` per packet.
    """
    paho = client._client
    sock = paho.socket()
    if not isinstance(sock, socket.socket):
        return  # a WebSocket transport wraps the socket: keep aiomqtt's own reader
    again = MQTTErrorCode.MQTT_ERR_AGAIN

    def read() -> None:
        try:
            for _ in range(burst):
                if paho.socket() is not sock:
                    return
                rc = paho._packet_read()
                if rc == again:
                    return
                if rc > 0:
                    paho._loop_rc_handle(rc)
                    return
        except Exception as exc:
            if not client._disconnected.done():
                client._disconnected.set_exception(exc)

    asyncio.get_running_loop().add_reader(sock.fileno(), read)


def send_pubacks(client: aiomqtt.Client, mids: Iterable[int]) -> None:
    """Queue the PUBACKs of ``mids``, in order, as one write on the connection.

    The bytes are what paho's own ``ack`` queues for each (MQTT 3.1.1 and 5: type 4, length
    2, the packet id; in 5 a missing reason code means success), joined.
    """
    packets = b"".join(_PUBACK.pack(_PUBACK_TYPE, 2, mid) for mid in mids)
    if packets:
        client._client._packet_queue(_PUBACK_TYPE, packets, 0, 1)


def send_publishes(client: aiomqtt.Client, messages: Sequence[OutgoingMessage]) -> None:
    """Queue QoS 0 ``messages``, in order, as one write on the connection; nothing waits.

    Each is the PUBLISH packet paho's ``publish`` would queue for it (no packet id at QoS 0;
    in MQTT 5 an empty property list), with its retain flag. Raises ValueError for a message
    that is not QoS 0 or whose topic paho would refuse, before anything is queued, and
    ``aiomqtt.MqttError`` when the connection is gone.
    """
    paho = client._client
    v5 = paho._protocol == MQTTProtocolVersion.MQTTv5
    parts: list[bytes | bytearray] = []
    for message in messages:
        if message.qos != 0:
            raise ValueError(f"only QoS 0 messages are joined, not QoS {message.qos}")
        topic = message.topic.encode()
        if not topic or b"+" in topic or b"#" in topic or len(topic) > 0xFFFF:
            raise ValueError(f"cannot publish to topic {message.topic!r}")
        payload = message.payload.encode()
        remaining = 2 + len(topic) + v5 + len(payload)
        if remaining > _MAX_REMAINING:
            raise ValueError(f"payload for {message.topic!r} is too large")
        header = bytearray((_PUBLISH_TYPE | (_RETAIN if message.retain else 0),))
        while True:
            remaining, digit = divmod(remaining, 128)
            header.append(digit | 0x80 if remaining else digit)
            if not remaining:
                break
        parts += (header, _TOPIC_LENGTH.pack(len(topic)), topic, b"\0" if v5 else b"", payload)
    if not parts:
        return
    if paho.socket() is None:
        raise aiomqtt.MqttError("not connected")
    rc = paho._packet_queue(_PUBLISH_TYPE, b"".join(parts), 0, 0, mqtt.MQTTMessageInfo(0))
    if rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
        raise aiomqtt.MqttCodeError(rc, "could not publish")


def disconnect(client: aiomqtt.Client) -> None:
    """A clean DISCONNECT on the connection (the session stays, the will is not sent); the
    connection's end then reaches whoever waits on it."""
    client._client.disconnect()


def ignore_late_acknowledgements(client: aiomqtt.Client) -> None:
    """Drop a SUBACK or UNSUBACK nobody waits for any more.

    A subscribe whose caller was cancelled (a stop while a device is being bound) still gets its
    acknowledgement; aiomqtt 2.5 logs that as an error with a traceback ("Unexpected message
    ID"), though nothing went wrong.
    """
    paho = client._client
    for waiting, attribute in (
        (client._pending_subscribes, "on_subscribe"),
        (client._pending_unsubscribes, "on_unsubscribe"),
    ):
        callback = getattr(paho, attribute)

        def acknowledged(
            *args: Any, _waiting: dict[int, Any] = waiting, _callback: Any = callback
        ) -> None:
            if args[2] in _waiting:  # (client, userdata, mid, ...)
                _callback(*args)

        setattr(paho, attribute, acknowledged)


def abandon(client: aiomqtt.Client) -> None:
    """Forget a connect that did not finish (a stop, a time-out): as aiomqtt 2.5 does after a
    refused one, its connect future is made new and the connection dropped. Left cancelled, the
    later disconnect callback raised out of it ("Exception in callback" with a traceback)."""
    if client._connected.done():
        client._connected = asyncio.get_running_loop().create_future()
    with contextlib.suppress(Exception):
        client._client.disconnect()
