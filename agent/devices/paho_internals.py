"""Every place the agent's MQTT client reaches past aiomqtt's and paho-mqtt's public API.

aiomqtt 2.x runs paho-mqtt's ``Client`` (its private ``_client``) on the event loop. What the
agent needs and neither offers is done here, and only here, with paho's own internals:

- ``_handle_on_message(message)``: replaced per connection (:func:`receive_with`). paho's
  receive path calls it for every PUBLISH it decoded; paho's own matches the topic against
  per-filter callbacks (none here) under two locks, then calls aiomqtt's ``on_message``, which
  builds a message of its own for ``client.messages``. The agent takes paho's message straight
  into its queue.
- ``_packet_handle()`` with ``_in_packet``, ``_loop_rc_handle(rc)``, ``_msgtime_mutex`` and
  ``_last_bytes_received`` (2.2; ``_last_msg_in`` in 2.1), and ``_packet_read()``: what paho's
  ``loop_read`` runs (:func:`read_in_bursts`). The agent reads what the socket holds per
  event-loop turn and parses QoS 0 and 1 PUBLISH packets itself; every other packet is handed
  to ``_packet_handle`` in ``_in_packet`` as ``_packet_read`` hands it over, errors go to
  ``_loop_rc_handle``, and the keep-alive's clock is set as ``_packet_read`` sets it. A packet
  paho's reader began before is finished by ``_packet_read``.
- ``_packet_queue(command, packet, mid, qos, info=None)`` and the ``_out_packet`` entries it
  makes (:func:`send_pubacks`, :func:`send_publishes`): bytes queued on the connection as one
  write. paho queues (and writes, a ``send`` each) one packet per PUBACK or PUBLISH; a commit
  settles hundreds of QoS 1 messages at once, and a relay flush publishes a state per series.
  ``_packet_write`` gives a queued PUBLISH entry of QoS 0 its ``info`` back once written (and
  calls ``on_publish`` with its ``mid``): the joined publishes carry an info of their own under
  mid 0, which paho never gives a message.
- ``_sock``'s ``send``, ``_out_packet`` and ``_last_msg_out`` (:func:`_write`): when nothing
  waits in paho's queue, the joined bytes are sent at once, as ``_packet_write`` sends them and
  sets the keep-alive's clock; only what the socket does not take is queued. Queued through
  paho, each write had aiomqtt register the socket for writing (a system call), wait a turn of
  the event loop, run paho's writer (for a PUBLISH, a callback with a ``Properties`` built for
  it), then unregister it (another).
- ``_protocol``: MQTT 5 PUBLISH packets carry a properties length, 3.1.1 ones do not.
- aiomqtt's ``_client`` (paho's client), ``_connected`` and ``_disconnected`` (its futures for
  the CONNACK and the connection's end), ``_pending_subscribes`` and ``_pending_unsubscribes``
  (packet ids waited for).

paho-mqtt is pinned to the minor versions below in pyproject.toml; ``CHECKED_PAHO_VERSIONS`` are
the releases these internals were read in, and tests/agent/devices/test_paho_internals.py fails
on any other, and when an internal is gone or its signature changed. A new paho release is read
against this list (its ``client.py``: the methods above, ``_packet_write`` and
``_handle_publish``) before it is added.
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
from paho.mqtt import MQTTException
from paho.mqtt.enums import MQTTErrorCode, MQTTProtocolVersion

from agent.devices.codec import OutgoingMessage

__all__ = [
    "CHECKED_PAHO_VERSIONS",
    "Receiver",
    "abandon",
    "disconnect",
    "ignore_late_acknowledgements",
    "manual_acks",
    "read_in_bursts",
    "receive_with",
    "send_pubacks",
    "send_publishes",
    "settle",
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
# Bytes taken from the socket in one event-loop turn at most (some hundred telemetry messages).
_RECV_BYTES = 16 * 1024


def manual_acks(client: aiomqtt.Client) -> None:
    """Have paho leave QoS 1 acknowledgements to the agent (paho's public switch, reached
    through aiomqtt's private client: aiomqtt 2.5 has no option for it)."""
    client._client.manual_ack_set(True)


Receiver = Callable[[str, bytes, int, bool, int], None]
"""What takes a received PUBLISH: topic, payload, QoS, retain flag, packet id."""


def receive_with(client: aiomqtt.Client, receive: Receiver) -> None:
    """Hand every PUBLISH that paho's own reader decodes for ``client`` to ``receive``, in place
    of paho's ``_handle_on_message`` (until :func:`read_in_bursts` takes over the socket, and for
    QoS 2). An exception still ends the connection, as paho's does with ``suppress_exceptions``
    off."""

    def handle_on_message(message: mqtt.MQTTMessage) -> None:
        receive(message.topic, bytes(message.payload), message.qos, message.retain, message.mid)

    client._client._handle_on_message = handle_on_message  # type: ignore[method-assign]


def read_in_bursts(
    client: aiomqtt.Client, receive: Receiver, pause: Callable[[], float] | None = None
) -> None:
    """Read what the socket holds, up to ``_RECV_BYTES`` a time, each time it is readable, and
    hand each QoS 0 or 1 PUBLISH in it to ``receive``; every other packet to paho.

    ``pause``: after a read that took less than ``_RECV_BYTES``, how long to leave the socket
    unread (0: read it again as soon as it is readable). What arrives meanwhile waits in the
    socket and is read at once after it; the connection's end is noticed then too.

    aiomqtt's reader has paho read one packet per event-loop turn, and paho reads a packet with
    a ``recv`` for its type, one per byte of its length and one for the rest, then builds an
    ``MQTTMessage`` (its properties, a debug log line, a lock for its time): at a farm's pace
    that was most of the agent's CPU on the network side. Here a PUBLISH is parsed where it
    lies in the buffer (MQTT 3.1.1 and 5 section 3.3: its topic, the packet id at QoS 1, in 5
    the properties, skipped, then the payload) and nothing else is made of it. Every other
    packet (acknowledgements of the agent's own publishes and subscriptions, PINGRESP,
    DISCONNECT, and a QoS 2 PUBLISH with its handshake) goes to paho's ``_packet_handle`` in
    ``_in_packet``, as paho's ``_packet_read`` leaves it, and the time paho's keep-alive
    watches is set as its reader sets it. A packet paho's reader began before this one took
    over is finished by paho. Replaces aiomqtt's reader for this connection (same error
    handling: a failed read ends the connection); aiomqtt removes it when the socket closes.
    """
    paho = client._client
    sock = paho.socket()
    if not isinstance(sock, socket.socket):
        return  # a WebSocket transport wraps the socket: keep aiomqtt's own reader
    raw: socket.socket = sock
    v5 = paho._protocol == MQTTProtocolVersion.MQTTv5
    # paho 2.1 keeps the time of the last packet in, 2.2 of the last bytes in.
    stamp = "_last_bytes_received" if hasattr(paho, "_last_bytes_received") else "_last_msg_in"
    buffer = bytearray()
    again = MQTTErrorCode.MQTT_ERR_AGAIN
    lost = MQTTErrorCode.MQTT_ERR_CONN_LOST
    loop = asyncio.get_running_loop()
    fd = raw.fileno()

    def handle(command: int, body: bytearray, start: int, end: int) -> int:
        """One whole packet, ``body[start:end]`` after its fixed header; paho's return code."""
        if command & 0xF0 == _PUBLISH_TYPE and (qos := (command >> 1) & 3) < 2:
            at = start + 2 + ((body[start] << 8) | body[start + 1])
            topic = body[start + 2 : at].decode("utf-8", "replace")
            mid = 0
            if qos:
                mid = (body[at] << 8) | body[at + 1]
                at += 2
            if v5:
                length, at = _varint(body, at, end)
                if at < 0:
                    raise ValueError("malformed PUBLISH properties")
                at += length
            receive(topic, bytes(body[at:end]), qos, bool(command & _RETAIN), mid)
            return MQTTErrorCode.MQTT_ERR_SUCCESS
        paho._in_packet = {
            "command": command,
            "have_remaining": 1,
            "remaining_count": [],
            "remaining_mult": 1,
            "remaining_length": end - start,
            "packet": body[start:end],
            "to_process": 0,
            "pos": 0,
        }
        try:
            return int(paho._packet_handle())
        except MQTTException:  # paho 2.2's MalformedPacket, as its reader treats it
            return MQTTErrorCode.MQTT_ERR_PROTOCOL
        finally:
            paho._in_packet = _fresh_in_packet()

    def resume() -> None:
        # Not on a socket closed meanwhile (its number may be another's by now).
        if paho.socket() is sock and raw.fileno() == fd:
            loop.add_reader(fd, read)

    def read() -> None:
        try:
            if paho.socket() is not sock:
                return
            while paho._in_packet["command"]:
                rc = paho._packet_read()
                if rc == again:
                    return
                if rc > 0:
                    paho._loop_rc_handle(rc)
                    return
            try:
                data = raw.recv(_RECV_BYTES)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                paho._loop_rc_handle(lost)
                return
            buffer.extend(data)
            with paho._msgtime_mutex:
                setattr(paho, stamp, mqtt.time_func())
            at, size = 0, len(buffer)
            while (header := _fixed_header(buffer, at, size)) is not None:
                start, end = header
                code = handle(buffer[at], buffer, start, end)
                at = end
                if code > 0:
                    paho._loop_rc_handle(MQTTErrorCode(code))
                    return
                if paho.socket() is not sock:
                    return  # the packet ended the connection (a DISCONNECT)
            del buffer[:at]
            if pause is not None and len(data) < _RECV_BYTES and (wait := pause()) > 0:
                loop.remove_reader(fd)
                loop.call_later(wait, resume)
        except Exception as exc:
            if not client._disconnected.done():
                client._disconnected.set_exception(exc)

    loop.add_reader(fd, read)


def _fixed_header(buffer: bytearray, at: int, size: int) -> tuple[int, int] | None:
    """Where the packet at ``at`` continues after its fixed header and where it ends, or None
    while it is not all in ``buffer``; ValueError for a length of more than four bytes."""
    if at + 2 > size:
        return None
    length, start = _varint(buffer, at + 1, size)
    if start < 0 or start + length > size:
        return None
    return start, start + length


def _varint(buffer: bytearray, at: int, size: int | None = None) -> tuple[int, int]:
    """A variable byte integer at ``at`` (MQTT section 1.5.5) and where it ends; (0, -1) when
    ``buffer`` ends before it does (up to ``size``)."""
    end = len(buffer) if size is None else size
    value, shift = 0, 0
    for index in range(at, min(at + 4, end)):
        byte = buffer[index]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, index + 1
        shift += 7
    if end - at >= 4:
        raise ValueError("malformed remaining length")
    return 0, -1


def _fresh_in_packet() -> Any:
    """paho's ``_in_packet`` between packets, as its reader leaves it."""
    return {
        "command": 0,
        "have_remaining": 0,
        "remaining_count": [],
        "remaining_mult": 1,
        "remaining_length": 0,
        "packet": bytearray(b""),
        "to_process": 0,
        "pos": 0,
    }


def send_pubacks(client: aiomqtt.Client, mids: Iterable[int]) -> None:
    """Queue the PUBACKs of ``mids``, in order, as one write on the connection.

    The bytes are what paho's own ``ack`` queues for each (MQTT 3.1.1 and 5: type 4, length
    2, the packet id; in 5 a missing reason code means success), joined.
    """
    packets = b"".join(_PUBACK.pack(_PUBACK_TYPE, 2, mid) for mid in mids)
    if packets:
        _write(client._client, _PUBACK_TYPE, packets, 1)


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
    rc = _write(paho, _PUBLISH_TYPE, b"".join(parts), 0)
    if rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
        raise aiomqtt.MqttCodeError(rc, "could not publish")


def _write(paho: mqtt.Client, command: int, data: bytes, qos: int) -> MQTTErrorCode:
    """Send ``data`` (whole packets) now if nothing waits before it; queue with paho what the
    socket does not take at once (or all of it, behind what waits), to be written in order."""
    sock = paho._sock
    if not paho._out_packet and isinstance(sock, socket.socket):
        try:
            sent = sock.send(data)
        except OSError:  # full (BlockingIOError), or broken: paho's writer finds out
            sent = 0
        if sent:
            with paho._msgtime_mutex:
                paho._last_msg_out = mqtt.time_func()
            if sent == len(data):
                return MQTTErrorCode.MQTT_ERR_SUCCESS
            data = data[sent:]
    info = mqtt.MQTTMessageInfo(0) if command == _PUBLISH_TYPE and qos == 0 else None
    return paho._packet_queue(command, data, 0, qos, info)


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


def settle(client: aiomqtt.Client) -> None:
    """Take the connection's end as handled once the session is over. aiomqtt leaves the
    exception of a broker that dropped the connection in its ``_disconnected`` future for its
    message iterator to raise; a session stopped before it next waited there (a stop during the
    subscribe, say) never read it, and asyncio logged "Future exception was never retrieved"."""
    ended = client._disconnected
    if ended.done() and not ended.cancelled():
        ended.exception()


def abandon(client: aiomqtt.Client) -> None:
    """Forget a connect that did not finish (a stop, a time-out): as aiomqtt 2.5 does after a
    refused one, its connect future is made new and the connection dropped. Left cancelled, the
    later disconnect callback raised out of it ("Exception in callback" with a traceback)."""
    if client._connected.done():
        client._connected = asyncio.get_running_loop().create_future()
    with contextlib.suppress(Exception):
        client._client.disconnect()
    settle(client)  # the broker may have dropped it between the CONNACK and the stop
