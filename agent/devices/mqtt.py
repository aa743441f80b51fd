"""One supervised MQTT connection (aiomqtt 2.x); the device runtime runs two, telemetry and
control (agent/devices/mqtt_split.py), shared by every MQTT device.

The client reconnects with jittered exponential back-off, restores its subscriptions after every
connect (a broker that restarted without persistence forgot them), publishes its birth message,
and hands incoming messages to one handler, in order, through a queue: the network side never
waits for the handler.

A QoS 1 message is acknowledged to the broker only once it is handled and what the handler
queued for storage is committed (the :class:`CommitBarrier`, the reading writer), in the order
the messages arrived. Until then the broker counts it as in flight, so a slow writer slows the
broker's deliveries (its in-flight window, then its queue for the session) instead of dropping
readings; QoS 1 messages are never dropped here. QoS 0 messages carry no such promise: beyond
``queue_size`` waiting messages they are dropped and counted. With a persistent session
(clean_session false, a client id stable across restarts) the broker keeps QoS 1 messages for
the agent while it is away, and re-delivers the ones it never acknowledged.

The broker re-delivers an unacknowledged message only on a new connection (MQTT 3.1.1 section
4.4, MQTT 5 section 4.4), and until then the message holds a place in its in-flight window: a
connection that left messages unacknowledged would, once the window is full of them, receive
nothing more. So when a message's readings could not be stored, the client acknowledges what
was stored and reconnects, and the broker delivers the message again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import aiomqtt
from paho.mqtt.reasoncodes import ReasonCode

from agent.devices import paho_internals
from agent.devices.codec import OutgoingMessage
from agent.devices.errors import DeviceUnavailable
from farmkit.backoff import Backoff, Retry
from farmkit.tasks import cancel_and_wait
from farmkit.throttled_log import ThrottledLog
from protocol.records import record

__all__ = [
    "PUBLISH_POLICY",
    "CommitBarrier",
    "InboundMessage",
    "MessageHandler",
    "MqttClient",
    "MqttSettings",
    "MqttStats",
    "outgoing",
]

log = logging.getLogger(__name__)


class _LostConnectionIsAWarning(logging.Filter):
    """paho logs a connection the broker reset at ERROR ("failed to receive on socket"); the
    supervisor reconnects and reports it as a warning (a broker restart, the demo's broker
    stopped with the agent), so it is a warning here too."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.ERROR and str(record.msg).startswith("failed to receive"):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


_PAHO_LOG = logging.getLogger(f"{__name__}.paho")
"""paho-mqtt's own messages, through aiomqtt."""
_PAHO_LOG.addFilter(_LostConnectionIsAWarning())

MessageKind = Literal["command", "status", "state", "telemetry"]

#: QoS and retain per kind of message the agent publishes.
#: Commands are QoS 1 and never retained: a retained command would be replayed to the device on
#: every reconnect (Tasmota docs warn against retained cmnd topics). Status (birth/will) is
#: retained so late subscribers see it. Telemetry is QoS 0 like the firmwares publish it.
PUBLISH_POLICY: dict[MessageKind, tuple[int, bool]] = {
    "command": (1, False),
    "status": (1, True),
    "state": (1, False),
    "telemetry": (0, False),
}

_SUBSCRIBE_CHUNK = 50
# The longest the dispatcher handles messages before it lets the rest of the agent run.
_DISPATCH_SLICE_S = 0.005
# The share of the event loop a backlog of telemetry may take: after each slice the dispatcher
# rests for the rest of its duty cycle, so the farm's controls stay responsive while a flood
# runs flat out. The broker keeps what is not yet acknowledged (QoS 1): nothing is lost.
_INGEST_SHARE = 0.75
# The longest the telemetry lane waits at a time for requests in progress, and how often it looks.
_STEP_ASIDE_S = 0.05
_STEP_ASIDE_POLL_S = 0.002
# A connection that reads in step with the commits (``in_step_with_commits``) reads this long
# before the batch closes, so what it reads is handled in time to join it.
_READ_BEFORE_COMMIT_S = 0.1


def outgoing(kind: MessageKind, topic: str, payload: str) -> OutgoingMessage:
    """Build a message with the QoS and retain flag of its kind."""
    qos, retain = PUBLISH_POLICY[kind]
    return OutgoingMessage(topic=topic, payload=payload, qos=qos, retain=retain)


@record
class InboundMessage:
    """A message received from the broker."""

    topic: str
    payload: bytes
    qos: int = 0
    retain: bool = False


MessageHandler = Callable[[InboundMessage], Awaitable[None]]


class CommitBarrier(Protocol):
    """Where what a handler queued becomes durable: positions in a stream of queued items."""

    def mark(self) -> int:
        """The position after everything queued so far."""
        ...

    async def room(self) -> None:
        """Wait until there is room to queue a message's worth of items."""
        ...

    def full(self) -> bool:
        """True while :meth:`room` would wait."""
        ...

    def outcome(self, start: int, end: int) -> bool | None:
        """Whether the items queued between two marks are committed: True, False if one of
        them was refused or lost, None while they are not all finished."""
        ...

    def closes_at(self) -> float | None:
        """The loop time at which the items queued so far are committed at the latest, or None
        when nothing waits for a commit."""
        ...

    async def progress(self) -> None:
        """Wait until more items are finished."""
        ...


class _Delivery:
    """A received message, with what acknowledging it needs: its connection and packet id, and
    (QoS 1) where its readings stand, ``commit``: None until it is handled, then the barrier
    positions its handler queued between, or True when there is nothing to wait for, or False
    when its connection was lost before it was handled (the broker delivers it again).

    The one mutable object per message: what the acknowledger asks of it, no future per message.
    """

    __slots__ = ("client", "commit", "message", "mid")

    def __init__(
        self, message: InboundMessage, client: aiomqtt.Client, mid: int, commit: bool | None
    ) -> None:
        self.message = message
        self.client = client
        self.mid = mid
        self.commit: tuple[int, int] | bool | None = commit


@dataclass(frozen=True)
class MqttSettings:
    """Connection settings; ``will`` and ``birth`` announce this client's own availability."""

    host: str = "127.0.0.1"
    port: int = 1883
    client_id: str = "farm-agent"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    keepalive: int = 30
    persistent_session: bool = True
    subscribe_qos: int = 1
    timeout: float = 10.0
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    queue_size: int = 10_000
    handler_timeout: float = 10.0
    will: OutgoingMessage | None = None
    birth: OutgoingMessage | None = None


@dataclass
class MqttStats:
    """Counters for /healthz and metrics."""

    connects: int = 0
    disconnects: int = 0
    received: int = 0
    dropped: int = 0
    """QoS 0 messages dropped because ``queue_size`` messages were already waiting."""
    handled: int = 0
    acknowledged: int = 0
    """QoS 1 messages acknowledged to the broker, each after its readings were committed."""
    unacknowledged: int = 0
    """QoS 1 messages left for the broker to re-deliver (storage failed or connection lost)."""
    handler_errors: int = 0
    handler_timeouts: int = 0
    published: int = 0


class MqttClient:
    """A supervised MQTT client; use ``async with`` or ``start()``/``stop()``.

    ``on_connect`` runs after every (re)connect, once subscriptions and birth are in place.
    """

    def __init__(
        self,
        settings: MqttSettings,
        handler: MessageHandler,
        *,
        barrier: CommitBarrier | None = None,
        on_connect: Callable[[], Awaitable[None]] | None = None,
        in_step_with_commits: bool = False,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.settings = settings
        # Telemetry: while the barrier gathers a batch, a trickle of messages is read from the
        # socket once, shortly before the batch closes, not message by message as it comes.
        self._in_step = in_step_with_commits and barrier is not None
        self._on_connect = on_connect
        self.stats = MqttStats()
        self._handler = handler
        self._barrier = barrier
        self._sleep = sleep
        self._backoff = Retry(Backoff(settings.backoff_initial, settings.backoff_max), rand)
        # Bounded by the broker's in-flight window for QoS 1, by ``queue_size`` for QoS 0.
        self._pending: deque[_Delivery] = deque()
        # Messages on the topics ``prioritize`` picks (devices' state reports, which confirm
        # commands) are handled before the waiting telemetry; each topic stays in one lane, so
        # a topic's messages keep their order.
        self._urgent: deque[_Delivery] = deque()
        self.prioritize: Callable[[str], bool] | None = None
        # While this says so (HTTP requests are being answered), the telemetry lane waits, up to
        # _STEP_ASIDE_S at a time: the broker keeps what is not yet acknowledged.
        self.busy: Callable[[], bool] | None = None
        # Topics another connection of the agent receives (see ``release``).
        self._released: set[str] = set()
        self._arrived = asyncio.Event()
        # QoS 1 messages in arrival order: MQTT wants PUBACKs in the order of the PUBLISHes.
        self._acks: deque[_Delivery] = deque()
        self._ack_ready = asyncio.Event()
        self._filters: set[str] = set()
        self._subscription_lock = asyncio.Lock()
        self._client: aiomqtt.Client | None = None
        # The connection messages arrive on: set at CONNACK, before subscribing (a resumed
        # session's queue flows at once), while _client waits for the subscriptions.
        self._receiving: aiomqtt.Client | None = None
        self._connected = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._problems = ThrottledLog(log)

    @property
    def filters(self) -> frozenset[str]:
        """The topic filters this client keeps subscribed."""
        return frozenset(self._filters)

    @property
    def connected(self) -> bool:
        """True while a broker connection is up."""
        return self._connected.is_set()

    async def __aenter__(self) -> MqttClient:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start connecting (in the background) and dispatching."""
        if self._tasks:
            raise RuntimeError("MQTT client already started")
        self._tasks = [
            asyncio.create_task(self._dispatch(), name="mqtt-dispatch"),
            asyncio.create_task(self._acknowledge(), name="mqtt-acknowledge"),
            asyncio.create_task(self._supervise(), name="mqtt-supervise"),
        ]

    async def stop(self) -> None:
        """Say goodbye (the will is not sent on a clean disconnect), disconnect, stop tasks."""
        if not self._tasks:
            return
        will = self.settings.will
        if will is not None and self._client is not None:
            with contextlib.suppress(DeviceUnavailable):
                await self.publish(will, timeout=min(2.0, self.settings.timeout))
        await cancel_and_wait(*reversed(self._tasks))
        self._tasks = []

    async def wait_connected(self, timeout: float) -> None:  # noqa: ASYNC109
        """Wait until connected; raise DeviceUnavailable after ``timeout`` seconds."""
        try:
            async with asyncio.timeout(timeout):
                await self._connected.wait()
        except TimeoutError as err:
            raise DeviceUnavailable(
                f"MQTT broker {self.settings.host}:{self.settings.port} not reachable"
            ) from err

    async def subscribe(self, filters: Iterable[str]) -> None:
        """Add topic filters; kept across reconnects. Subscribes now if connected."""
        new = [topic for topic in filters if topic not in self._filters]
        if not new:
            return
        self._filters.update(new)
        self._released.difference_update(new)
        async with self._subscription_lock:
            client = self._client
            if client is not None:
                try:
                    await self._subscribe(client, new)
                except aiomqtt.MqttError as err:
                    # The filters are remembered; the next connect subscribes them.
                    log.warning("MQTT subscribe failed, will retry on reconnect: %s", err)

    async def unsubscribe(self, filters: Iterable[str]) -> None:
        """Remove topic filters."""
        gone = [topic for topic in filters if topic in self._filters]
        if not gone:
            return
        self._filters.difference_update(gone)
        async with self._subscription_lock:
            client = self._client
            if client is not None:
                try:
                    await client.unsubscribe(gone, timeout=self.settings.timeout)
                except aiomqtt.MqttError as err:
                    log.warning("MQTT unsubscribe failed: %s", err)

    async def publish(self, message: OutgoingMessage, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Publish; for QoS 1/2 wait for the broker's acknowledgement.

        Raises DeviceUnavailable when not connected or the broker does not acknowledge in time.
        """
        client = self._client
        if client is None:
            raise DeviceUnavailable("MQTT broker not connected")
        try:
            await client.publish(
                message.topic,
                message.payload,
                qos=message.qos,
                retain=message.retain,
                timeout=timeout if timeout is not None else self.settings.timeout,
            )
        except aiomqtt.MqttError as err:
            raise DeviceUnavailable(f"MQTT publish to {message.topic} failed: {err}") from err
        self.stats.published += 1

    def publish_now(self, messages: Sequence[OutgoingMessage]) -> None:
        """Publish QoS 0 ``messages``, in order, as one write on the connection, without
        waiting (a QoS 0 publish has no acknowledgement to wait for).

        One ``send`` for the lot instead of one each: for a relay of many states at once, the
        system calls (and on loopback the broker's wake-ups) were most of the cost. Raises
        ValueError for a message that is not QoS 0 (nothing is published then), and
        DeviceUnavailable when not connected.
        """
        client = self._client
        if client is None:
            raise DeviceUnavailable("MQTT broker not connected")
        try:
            paho_internals.send_publishes(client, messages)
        except aiomqtt.MqttError as err:
            raise DeviceUnavailable(f"MQTT publish failed: {err}") from err
        self.stats.published += len(messages)

    async def _supervise(self) -> None:
        while True:
            try:
                await self._session()
            except aiomqtt.MqttError as err:
                log.warning(
                    "MQTT connection to %s:%d lost or refused: %s",
                    self.settings.host,
                    self.settings.port,
                    err,
                )
            except Exception:
                log.exception("MQTT session failed unexpectedly")
            delay = self._backoff.next_delay()
            log.info("MQTT reconnecting in %.1f s", delay)
            await self._sleep(delay)

    async def _session(self) -> None:
        settings = self.settings
        will = settings.will
        client = aiomqtt.Client(
            settings.host,
            settings.port,
            identifier=settings.client_id,
            username=settings.username,
            password=settings.password,
            clean_session=not settings.persistent_session,
            keepalive=settings.keepalive,
            timeout=settings.timeout,
            will=(
                aiomqtt.Will(will.topic, will.payload, will.qos, will.retain)
                if will is not None
                else None
            ),
            socket_options=((socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),),
            logger=_PAHO_LOG,
        )
        # QoS 1 messages are acknowledged by _acknowledge, after their readings are committed.
        paho_internals.manual_acks(client)
        # Messages come to our queue straight from paho's receive path; the connection a
        # message came on is what acknowledging it needs.
        paho_internals.receive_with(client, self._receiver(client))
        paho_internals.ignore_late_acknowledgements(client)
        # Receiving from here: a persistent session's unacknowledged messages may come right
        # behind the CONNACK, and are handled (and acknowledged on this connection) before
        # the connect returns.
        self._receiving = client
        try:
            async with asyncio.timeout(settings.timeout + 1):
                await client.__aenter__()
        except BaseException:
            self._receiving = None
            paho_internals.abandon(client)
            raise
        paho_internals.read_in_bursts(
            client, self._receiver(client), self._pause if self._in_step else None
        )
        try:
            self.stats.connects += 1
            self._backoff.reset()
            async with self._subscription_lock:
                await self._subscribe(client, sorted(self._filters))
                await self._drop_released(client, self._released)
                self._client = client
            self._connected.set()
            log.info(
                "MQTT connected to %s:%d as %s", settings.host, settings.port, settings.client_id
            )
            if settings.birth is not None:
                await client.publish(
                    settings.birth.topic,
                    settings.birth.payload,
                    qos=settings.birth.qos,
                    retain=settings.birth.retain,
                )
            if self._on_connect is not None:
                await self._on_connect()
            # Messages go to our queue as they arrive; this only waits for the disconnect.
            async for _ in client.messages:
                pass
        finally:
            self._client = None
            self._receiving = None
            self._connected.clear()
            self.stats.disconnects += 1
            self._forget_unhandled(client)
            # Cancellation here is shutdown: aiomqtt then disconnects cleanly (bounded by its
            # own timeout); after a network error it returns at once.
            try:
                with contextlib.suppress(aiomqtt.MqttError):
                    await client.__aexit__(None, None, None)
            finally:
                paho_internals.settle(client)

    async def _subscribe(self, client: aiomqtt.Client, filters: list[str]) -> None:
        qos = self.settings.subscribe_qos
        for start in range(0, len(filters), _SUBSCRIBE_CHUNK):
            chunk = filters[start : start + _SUBSCRIBE_CHUNK]
            granted = await client.subscribe(
                [(topic, qos) for topic in chunk], timeout=self.settings.timeout
            )
            for topic, code in zip(chunk, granted, strict=False):
                refused = (
                    code.is_failure
                    if isinstance(code, ReasonCode)
                    else isinstance(code, int) and code >= 0x80
                )
                if refused:
                    log.error("MQTT broker refused subscription to %s", topic)

    async def release(self, filters: Iterable[str]) -> None:
        """Make sure the broker sends nothing on ``filters`` here (another connection of the
        agent receives them), though this client id's persistent session may hold them from
        an earlier version: unsubscribe them now and after every connect."""
        new = set(filters) - self._filters - self._released
        if not new:
            return
        self._released.update(new)
        async with self._subscription_lock:
            client = self._client
            if client is not None:
                try:
                    await self._drop_released(client, new)
                except aiomqtt.MqttError as err:
                    log.warning("MQTT unsubscribe failed, will retry on reconnect: %s", err)

    async def _drop_released(self, client: aiomqtt.Client, filters: Iterable[str]) -> None:
        foreign = sorted(set(filters) - self._filters)
        for start in range(0, len(foreign), _SUBSCRIBE_CHUNK):
            chunk = foreign[start : start + _SUBSCRIBE_CHUNK]
            await client.unsubscribe(chunk, timeout=self.settings.timeout)

    def _receiver(self, client: aiomqtt.Client) -> paho_internals.Receiver:
        """What receives ``client``'s messages: each into our queue."""
        enqueue = self._enqueue

        def receive(topic: str, payload: bytes, qos: int, retain: bool, mid: int) -> None:
            enqueue(client, topic, payload, qos, retain, mid)

        return receive

    def _pause(self) -> float:
        """How long to leave the socket unread after a read: until shortly before the batch
        being gathered closes, while readings trickle (the barrier tells no close during a
        burst, when what is read sooner is committed sooner).

        Every message read alone wakes the event loop, the dispatcher and the acknowledger,
        each with caches gone cold: at a farm's pace, a third of the agent's CPU. The
        messages' readings wait for the batch's commit anyway (they are served live and
        acknowledged after it), so reading them just before it costs them no time; a state
        report confirming a command comes on the control connection, read as it comes."""
        assert self._barrier is not None
        closes = self._barrier.closes_at()
        if closes is None:
            return 0.0
        return closes - _READ_BEFORE_COMMIT_S - asyncio.get_running_loop().time()

    def _enqueue(
        self, client: aiomqtt.Client, topic: str, payload: bytes, qos: int, retain: bool, mid: int
    ) -> None:
        self.stats.received += 1
        if qos == 0 and len(self._pending) + len(self._urgent) >= self.settings.queue_size:
            self.stats.dropped += 1
            self._problems.warning("queue-full", "MQTT handler is behind; dropping QoS 0 messages")
            return
        inbound = InboundMessage(topic, payload, qos, retain)
        # QoS 0: nothing to acknowledge.
        delivery = _Delivery(inbound, client, mid, None if qos > 0 else True)
        urgent = self.prioritize is not None and self.prioritize(topic)
        (self._urgent if urgent else self._pending).append(delivery)
        if qos > 0:
            self._acks.append(delivery)
            self._ack_ready.set()
        self._arrived.set()

    def _forget_unhandled(self, client: aiomqtt.Client) -> None:
        """Drop the lost connection's unhandled QoS 1 messages: the broker re-delivers them."""
        for lane in (self._urgent, self._pending):
            kept = []
            for delivery in lane:
                if delivery.client is client and delivery.commit is None:
                    delivery.commit = False
                else:
                    kept.append(delivery)
            lane.clear()
            lane.extend(kept)
        self._ack_ready.set()

    def _take(self) -> _Delivery | None:
        if self._urgent:
            return self._urgent.popleft()
        if self._pending:
            return self._pending.popleft()
        return None

    async def _dispatch(self) -> None:
        barrier = self._barrier
        loop = asyncio.get_running_loop()
        # A turn runs until _DISPATCH_SLICE_S have passed, a wait for room in the barrier
        # included (as the rest of the agent runs meanwhile, it is the ingest's time too).
        turn_began = loop.time()
        while True:
            if not (self._urgent or self._pending):
                while not (self._urgent or self._pending):
                    self._arrived.clear()
                    await self._arrived.wait()
                turn_began = loop.time()
            if barrier is not None:
                await barrier.room()
            await self._slice(loop, turn_began)
            ran = loop.time() - turn_began
            if ran > _DISPATCH_SLICE_S:
                # A burst must not hold the event loop: requests and commands run between.
                await self._step_aside(loop, ran)
                turn_began = loop.time()

    async def _slice(self, loop: asyncio.AbstractEventLoop, turn_began: float) -> None:
        """Handle waiting messages, in order, until the turn has run ``_DISPATCH_SLICE_S`` (one
        message at least) or the barrier has no room; each within ``handler_timeout``.

        One deadline serves the slice, not a timer per message: every message of the slice
        begins within ``_DISPATCH_SLICE_S`` of the slice's start, so each still gets at least
        ``handler_timeout``.
        """
        barrier = self._barrier
        stats = self.stats
        handler = self._handler
        delivery: _Delivery | None = None
        start = 0
        try:
            async with asyncio.timeout_at(
                loop.time() + _DISPATCH_SLICE_S + self.settings.handler_timeout
            ):
                while (delivery := self._take()) is not None:
                    start = barrier.mark() if barrier is not None else 0
                    try:
                        await handler(delivery.message)
                        stats.handled += 1
                    except TimeoutError:  # the handler's own
                        self._timed_out(delivery)
                    except Exception:
                        stats.handler_errors += 1
                        self._problems.exception(
                            "handler-error", "MQTT handler failed on %s", delivery.message.topic
                        )
                    self._settle(delivery, start)
                    delivery = None
                    if loop.time() - turn_began > _DISPATCH_SLICE_S or (
                        barrier is not None and barrier.full()
                    ):
                        return
        except TimeoutError:
            if delivery is None:
                raise  # not a handler's: nothing else in the slice waits
            self._timed_out(delivery)
            self._settle(delivery, start)

    def _timed_out(self, delivery: _Delivery) -> None:
        self.stats.handler_timeouts += 1
        self._problems.error(
            "handler-timeout", "MQTT handler timed out on %s", delivery.message.topic
        )

    def _settle(self, delivery: _Delivery, start: int) -> None:
        """Tell the acknowledger what a handled message's commit is (QoS 1).

        A message the handler failed on is acknowledged too: a broker re-delivering it for
        ever would stall the session.
        """
        if delivery.commit is None:
            barrier = self._barrier
            delivery.commit = (start, barrier.mark()) if barrier is not None else True
            self._ack_ready.set()

    async def _step_aside(self, loop: asyncio.AbstractEventLoop, ran: float) -> None:
        """Let the rest of the agent run after a slice that ran ``ran`` seconds: for the rest of
        the ingest's duty cycle, and while it answers requests, wait (bounded); a waiting state
        report ends the wait."""
        began = loop.time()
        await asyncio.sleep(0)
        # Under a flood the other callbacks of this turn (the commit, the feed, the relay) are
        # the ingest's work too: the rest is a share of both.
        worked = ran + loop.time() - began
        until = loop.time() + min(worked * (1 - _INGEST_SHARE) / _INGEST_SHARE, _STEP_ASIDE_S)
        # Polled like the wait for requests: a wake-up per telemetry message would cost more.
        while not self._urgent and (left := until - loop.time()) > 0:  # noqa: ASYNC110
            await asyncio.sleep(min(left, _STEP_ASIDE_POLL_S))
        busy = self.busy
        if busy is None:
            return
        until = loop.time() + _STEP_ASIDE_S
        # Polled: three conditions, one of them a deadline; a few wake-ups per request.
        while busy() and not self._urgent and loop.time() < until:  # noqa: ASYNC110
            await asyncio.sleep(_STEP_ASIDE_POLL_S)

    async def _acknowledge(self) -> None:
        """Acknowledge QoS 1 messages in arrival order, each once its readings are committed.

        A commit settles a few hundred messages at once: their PUBACKs go out in one write,
        not one ``send`` (a system call, and on loopback the broker's wake-up) per message.
        """
        barrier = self._barrier
        while True:
            mids: list[int] = []
            left = False
            while self._acks and (committed := self._committed(self._acks[0])) is not None:
                delivery = self._acks.popleft()
                # Only on the connection the message came on: after a reconnect the broker
                # re-delivers what that connection left unacknowledged.
                live = delivery.client is self._receiving
                if committed and live:
                    mids.append(delivery.mid)
                    self.stats.acknowledged += 1
                else:
                    self.stats.unacknowledged += 1
                    left = left or live
            receiving = self._receiving
            if mids and receiving is not None:
                paho_internals.send_pubacks(receiving, mids)
            if left and receiving is not None:
                self._redeliver(receiving)
            if self._acks and self._acks[0].commit is not None:
                assert barrier is not None  # a message waits for a commit only with a barrier
                await barrier.progress()
            else:  # no message, or the first one is not handled yet
                self._ack_ready.clear()
                await self._ack_ready.wait()

    def _redeliver(self, client: aiomqtt.Client) -> None:
        """Reconnect, so the broker delivers again what ``client`` left unacknowledged."""
        self._problems.warning(
            "redeliver",
            "MQTT messages whose readings could not be stored left unacknowledged;"
            " reconnecting so the broker delivers them again",
        )
        # A clean DISCONNECT: the session stays (and the will is not sent); the supervisor
        # connects again at once.
        paho_internals.disconnect(client)

    def _committed(self, delivery: _Delivery) -> bool | None:
        """Whether a QoS 1 message's readings are committed (None: not known yet)."""
        commit = delivery.commit
        if commit is None or isinstance(commit, bool):
            return commit
        assert self._barrier is not None
        return self._barrier.outcome(*commit)
