"""The hub integration as the API serves it: status, entities, sensors, control, and the
admins' mapping of hub areas and entities to farms.

Written once for the agent and the cloud: each side hands over how it finds a caller's grant on a
farm, how it records an event, where it keeps pending irrigation closes and the area and entity
assignments. Every entity belongs to a farm or to none
(``integrations.home_assistant.ownership``): reads show the entities of farms the caller may
read, control needs control of the entity's farm, and each control action is an event in that
farm's log with who asked. With the integration off every hub call but ``status`` is a 503
``HOME_AUTOMATION_DISABLED``. An irrigation opened for a duration is closed again by the server
itself (``integrations.home_assistant.closes``), durably, retried until the hub takes it.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Awaitable, Mapping
from datetime import timedelta
from typing import Any, Protocol, TypeVar

from farmkit.backoff import Backoff
from integrations.home_assistant.areas import Area
from integrations.home_assistant.closes import CloseStore, IrrigationCloser, PendingClose
from integrations.home_assistant.errors import (
    AccessProxyRefused,
    HubBadServiceData,
    HubDisabled,
    HubEntityNotFound,
    HubError,
    HubUnauthorized,
)
from integrations.home_assistant.ownership import (
    AssignmentStore,
    EntityAccess,
    FarmGrant,
    HubAssignments,
)
from integrations.home_assistant.schemas import (
    HubAreaAssignment,
    HubAssignmentList,
    HubAssignmentRequest,
    HubControlRequest,
    HubControlResult,
    HubDeviceList,
    HubDeviceQuery,
    HubEntity,
    HubEntityAssignment,
    HubIrrigationControl,
    HubLightControl,
    HubPendingClose,
    HubSensor,
    HubSensorList,
    HubStatus,
)
from integrations.home_assistant.settings import HubConfig
from integrations.home_assistant.state_cache import HubStateCache
from protocol.access import Action, authorize, require_role
from protocol.errors import NotFound, ValidationFailed
from protocol.identity import Principal, Role
from protocol.timefmt import iso, utcnow

__all__ = ["EventRecorder", "FarmGrant", "HomeAutomation", "HubApi", "entity_of"]

log = logging.getLogger(__name__)

_T = TypeVar("_T")
#: Retries of a close the hub did not take: from 1 s, doubling, at most a minute apart.
_RETRY = Backoff(1.0, 60.0)


class HubApi(Protocol):
    """What the integration needs of the hub client (``client.HubClient``)."""

    last_latency_ms: float | None

    async def version(self) -> str | None: ...
    async def states(self) -> list[dict[str, Any]]: ...
    async def state(self, entity_id: str) -> dict[str, Any]: ...
    async def call_service(
        self, domain: str, service: str, data: Mapping[str, Any]
    ) -> list[dict[str, Any]]: ...


class EventRecorder(Protocol):
    """Records one event in a farm's log; returns its id.

    ``by`` is the caller a control action is recorded for (``None``: the server itself, e.g. a
    close at the end of a duration); the cloud writes the first on the caller's own row-level
    security path.
    """

    async def __call__(
        self,
        farm_id: str,
        kind: str,
        message: str,
        data: Mapping[str, Any],
        *,
        severity: str = "info",
        by: Principal | None = None,
    ) -> str: ...


_AREA_ID = re.compile(r"^[A-Za-z0-9_.-]{1,255}$")
_ENTITY_ID = re.compile(r"^[a-z0-9_]+\.[a-z0-9_]+$")


def entity_of(state: Mapping[str, Any], area: Area | None = None) -> HubEntity:
    """A hub state object as the API shows it, in ``area`` (from the hub's registries; else an
    ``area`` attribute, which some hubs set, names it)."""
    entity_id = str(state.get("entity_id", ""))
    attributes = state.get("attributes")
    attributes = dict(attributes) if isinstance(attributes, dict) else {}
    name = attributes.get("friendly_name")
    area_name = area.name if area is not None else attributes.get("area")
    return HubEntity(
        entity_id=entity_id,
        domain=entity_id.split(".", 1)[0],
        name=str(name) if name is not None else entity_id,
        state=str(state.get("state", "")),
        area=str(area_name) if area_name is not None else None,
        area_id=area.id if area is not None else None,
        attributes=attributes,
        last_changed=str(state["last_changed"]) if state.get("last_changed") else None,
    )


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if value == value and abs(value) != float("inf") else None


class HomeAutomation:
    """The integration, over one hub client (``None`` while disabled or not configured)."""

    def __init__(
        self,
        config: HubConfig,
        client: HubApi | None,
        grant: FarmGrant,
        record: EventRecorder,
        closes: CloseStore,
        assignments: AssignmentStore,
        *,
        retry: Backoff = _RETRY,
        poll_s: float = 60.0,
        cache: HubStateCache | None = None,
    ) -> None:
        self.config = config
        self._client = client if config.configured else None
        self._cache = cache
        self._entities: tuple[int, list[HubEntity]] | None = None
        # The entities with their farms, for the entity list and assignments they were made of.
        self._owned: tuple[list[HubEntity], HubAssignments, list[HubEntity]] | None = None
        self._grant = grant
        self._record = record
        self._assignments = assignments
        self.last_error: str | None = None
        self.closer = IrrigationCloser(closes, self._close_due, backoff=retry, poll_s=poll_s)

    def start(self) -> None:
        """Run pending irrigation closes (overdue ones at once) from now on."""
        if self._client is not None:
            self.closer.start()

    async def stop(self) -> None:
        """Stop the closer; pending closes stay on record."""
        await self.closer.stop()

    def _hub(self) -> HubApi:
        if self._client is None:
            raise HubDisabled()
        return self._client

    async def _call(self, work: Awaitable[_T]) -> _T:
        try:
            result = await work
        except HubError as err:
            self.last_error = err.code
            raise
        self.last_error = None
        return result

    async def status(self, principal: Principal) -> HubStatus:
        """Whether the integration is on and the hub answers, and the closes still pending."""
        client = self._client
        reachable: bool | None = None
        version: str | None = None
        pending: list[HubPendingClose] = []
        if client is not None:
            try:
                version = await self._call(client.version())
                reachable = True
            except HubError:
                reachable = False
            for close in await self.closer.store.pending():
                if await self._grant(principal, close.farm_id) is not None:
                    pending.append(_pending_of(close))
        return HubStatus(
            enabled=self.config.enabled,
            configured=self.config.configured,
            reachable=reachable,
            hub_version=version,
            proxy_in_use=self.config.proxy_protected,
            last_error=self.last_error,
            latency_ms=client.last_latency_ms if client is not None else None,
            pending_closes=pending,
        )

    async def _all_entities(self) -> list[HubEntity]:
        """Every entity, sorted: from the live cache when it holds them (built once per
        version of it), else from the hub."""
        hub = self._hub()
        if self._cache is None:
            states, version = await self._call(hub.states()), None
        else:
            states, version = await self._call(self._cache.states(hub.states))
        held = self._entities
        if version is not None and held is not None and held[0] == version:
            return held[1]
        areas = self._areas()
        entities = sorted(
            (entity_of(state, areas.get(str(state.get("entity_id")))) for state in states),
            key=lambda e: e.entity_id,
        )
        if version is not None:
            self._entities = (version, entities)
        return entities

    def _areas(self) -> Mapping[str, Area]:
        return self._cache.areas if self._cache is not None else {}

    async def _access(self, principal: Principal) -> EntityAccess:
        return EntityAccess(principal, await self._assignments.assignments(), self._grant)

    async def _visible(self, principal: Principal) -> list[HubEntity]:
        """The entities the caller may read, each with its farm."""
        entities = await self._all_entities()
        access = await self._access(principal)
        held = self._owned
        if held is not None and held[0] is entities and held[1] == access.assignments:
            owned = held[2]
        else:
            owned = [
                entity.model_copy(
                    update={"farm_id": access.assignments.farm_of(entity.entity_id, entity.area_id)}
                )
                for entity in entities
            ]
            self._owned = (entities, access.assignments, owned)
        if principal.is_admin:
            return owned
        return [entity for entity in owned if await access.may_read(entity.farm_id)]

    async def farm_of(
        self, entity_id: str, assignments: HubAssignments | None = None
    ) -> str | None:
        """The farm an entity belongs to now (``None``: to no farm)."""
        held = assignments if assignments is not None else await self._assignments.assignments()
        area = self._areas().get(entity_id)
        return held.farm_of(entity_id, area.id if area is not None else None)

    async def devices(self, principal: Principal, query: HubDeviceQuery) -> HubDeviceList:
        """The hub's entities of farms the caller may read, filtered by domain and area."""
        entities = await self._visible(principal)
        if query.domain is not None:
            entities = [e for e in entities if e.domain == query.domain]
        if query.area is not None:
            entities = [e for e in entities if e.area == query.area]
        domains: dict[str, int] = {}
        for entity in entities:
            domains[entity.domain] = domains.get(entity.domain, 0) + 1
        return HubDeviceList(devices=entities, total=len(entities), domains=domains)

    async def sensors(self, principal: Principal) -> HubSensorList:
        """The hub's sensor entities of farms the caller may read, with units and classes."""
        sensors = []
        for entity in await self._visible(principal):
            if entity.domain != "sensor":
                continue
            unit = entity.attributes.get("unit_of_measurement")
            device_class = entity.attributes.get("device_class")
            sensors.append(
                HubSensor(
                    entity_id=entity.entity_id,
                    name=entity.name,
                    state=entity.state,
                    value=_number(entity.state),
                    unit=str(unit) if unit is not None else None,
                    device_class=str(device_class) if device_class is not None else None,
                    last_changed=entity.last_changed,
                )
            )
        sensors.sort(key=lambda s: s.entity_id)
        return HubSensorList(sensors=sensors)

    # Assignments (admins) -------------------------------------------------------------------------

    async def assignments(self, principal: Principal) -> HubAssignmentList:
        """Every area mapping and entity assignment."""
        require_role(principal, Role.ADMIN)
        held = await self._assignments.assignments()
        return HubAssignmentList(
            areas=[HubAreaAssignment(area_id=a, farm_id=f) for a, f in sorted(held.areas.items())],
            entities=[
                HubEntityAssignment(entity_id=e, farm_id=f)
                for e, f in sorted(held.entities.items())
            ],
        )

    async def set_area(
        self, principal: Principal, area_id: str, body: HubAssignmentRequest
    ) -> HubAreaAssignment:
        """Map a hub area to a farm: its entities become the farm's."""
        require_role(principal, Role.ADMIN)
        _check("area_id", area_id, _AREA_ID)
        await self._assignments.set_area(area_id, body.farm_id, principal)
        return HubAreaAssignment(area_id=area_id, farm_id=body.farm_id)

    async def clear_area(self, principal: Principal, area_id: str) -> None:
        """Unmap an area: its entities are of no farm (unless assigned on their own)."""
        require_role(principal, Role.ADMIN)
        _check("area_id", area_id, _AREA_ID)
        if not await self._assignments.clear_area(area_id):
            raise NotFound("The area is not mapped to a farm")

    async def set_entity(
        self, principal: Principal, entity_id: str, body: HubAssignmentRequest
    ) -> HubEntityAssignment:
        """Assign an entity to a farm, whatever its area."""
        require_role(principal, Role.ADMIN)
        _check("entity_id", entity_id, _ENTITY_ID)
        await self._assignments.set_entity(entity_id, body.farm_id, principal)
        return HubEntityAssignment(entity_id=entity_id, farm_id=body.farm_id)

    async def clear_entity(self, principal: Principal, entity_id: str) -> None:
        """Remove an entity's own assignment: its area's farm applies again."""
        require_role(principal, Role.ADMIN)
        _check("entity_id", entity_id, _ENTITY_ID)
        if not await self._assignments.clear_entity(entity_id):
            raise NotFound("The entity has no farm assignment")

    # Control -------------------------------------------------------------------------------------

    async def control(self, principal: Principal, body: HubControlRequest) -> HubControlResult:
        """Call ``body.action`` of the entity's domain with ``body.data``."""
        domain = body.entity_id.split(".", 1)[0]
        farm_id = await self._authorize(principal, body.farm_id, body.entity_id)
        return await self._service(
            principal, farm_id, body.entity_id, domain, body.action, body.data
        )

    async def light(self, principal: Principal, body: HubLightControl) -> HubControlResult:
        """Switch a light, with brightness and colour temperature."""
        data: dict[str, Any] = {}
        if body.brightness is not None:
            data["brightness_pct"] = body.brightness
        if body.color_temp_kelvin is not None:
            data["color_temp_kelvin"] = body.color_temp_kelvin
        service = "turn_on" if body.state == "on" else "turn_off"
        farm_id = await self._authorize(principal, body.farm_id, body.entity_id)
        return await self._service(principal, farm_id, body.entity_id, "light", service, data)

    async def irrigation(
        self, principal: Principal, body: HubIrrigationControl
    ) -> HubControlResult:
        """Open, close or position a valve or switch; with a duration, close it again later.

        The close is on record before the hub is asked to open, so no crash can leave a valve
        open without one; if the hub refuses the open, the record is undone.
        """
        domain, service, data = _irrigation_service(body.entity_id, body.action, body.position)
        entity_id = body.entity_id
        farm_id = await self._authorize(principal, body.farm_id, entity_id)
        store = self.closer.store
        if body.duration_s is None:
            result = await self._service(principal, farm_id, entity_id, domain, service, data)
            if body.action == "close":
                await store.cancel(entity_id)
            return result
        close_at = utcnow() + timedelta(seconds=body.duration_s)
        close = PendingClose(
            id=str(uuid.uuid4()),
            entity_id=entity_id,
            farm_id=farm_id,
            close_at=close_at,
            requested_by=principal.user_id,
            next_try_at=close_at,
        )
        previous = await store.put(close)
        try:
            result = await self._service(
                principal, farm_id, entity_id, domain, service, data, close_at=iso(close_at)
            )
        except (HubBadServiceData, HubEntityNotFound, HubUnauthorized, AccessProxyRefused):
            # The hub certainly did not open it. After a timeout or a dropped connection it
            # may have: the close stays (closing a closed valve is harmless).
            await store.restore(close, previous)
            raise
        self.closer.wake()
        return result.model_copy(update={"close_at": iso(close_at)})

    async def _authorize(self, principal: Principal, named: str | None, entity_id: str) -> str:
        """Allow control of the entity, by its farm; the farm whose log records the action."""
        access = await self._access(principal)
        farm_id = await self.farm_of(entity_id, access.assignments)
        await access.authorize_control(entity_id, farm_id)
        if farm_id is None:  # an admin, on an entity of no farm: the farm they name logs it
            if named is None:
                raise ValidationFailed.of(
                    [("farm_id", "the entity belongs to no farm: name the farm to log it in")]
                )
            authorize(principal, Action.CONTROL, await access.grant_on(named))
            farm_id = named
        elif named is not None and named != farm_id:
            raise ValidationFailed.of([("farm_id", "the entity belongs to another farm")])
        # Home Assistant answers a service call on an unknown entity with [] (no error).
        await self._call(self._hub().state(entity_id))
        return farm_id

    async def _service(
        self,
        principal: Principal,
        farm_id: str,
        entity_id: str,
        domain: str,
        service: str,
        data: Mapping[str, Any],
        *,
        close_at: str | None = None,
    ) -> HubControlResult:
        changed = await self._call(
            self._hub().call_service(domain, service, {**data, "entity_id": entity_id})
        )
        entities = [entity_of(state) for state in changed]
        recorded: dict[str, Any] = {
            "entity_id": entity_id,
            "service": f"{domain}.{service}",
            "data": dict(data),
            "user_id": principal.user_id,
            "changed": {e.entity_id: e.state for e in entities},
        }
        if close_at is not None:
            recorded["close_at"] = close_at
        event_id = await self._record(
            farm_id, "hub_control", f"{domain}.{service} on {entity_id}", recorded, by=principal
        )
        return HubControlResult(
            entity_id=entity_id, service=f"{domain}.{service}", changed=entities, event_id=event_id
        )

    async def _record_quietly(
        self,
        farm_id: str,
        kind: str,
        message: str,
        data: Mapping[str, Any],
        *,
        severity: str = "info",
    ) -> None:
        # The hub has acted (or failed) either way: a log that cannot take the event (its farm
        # was deleted meanwhile) must not make the close be tried again for ever.
        try:
            await self._record(farm_id, kind, message, data, severity=severity)
        except Exception:
            log.exception("recording %s for farm %s failed", kind, farm_id)

    async def _close_due(self, close: PendingClose) -> None:
        """Close an irrigation whose time is up (raises HubError to be retried)."""
        domain, service, data = _irrigation_service(close.entity_id, "close", None)
        try:
            await self._call(
                self._hub().call_service(domain, service, {**data, "entity_id": close.entity_id})
            )
        except HubError as err:
            if close.attempts == 0:
                await self._record_quietly(
                    close.farm_id,
                    "hub_irrigation_close_failed",
                    f"{close.entity_id} could not be closed yet ({err.code}); retrying",
                    {
                        "entity_id": close.entity_id,
                        "error": err.code,
                        "close_at": iso(close.close_at),
                    },
                    severity="warning",
                )
            raise
        late_s = max(0.0, (utcnow() - close.close_at).total_seconds())
        await self._record_quietly(
            close.farm_id,
            "hub_irrigation_closed",
            f"{close.entity_id} closed at the end of its duration",
            {
                "entity_id": close.entity_id,
                "service": f"{domain}.{service}",
                "user_id": None,
                "requested_by": close.requested_by,
                "close_at": iso(close.close_at),
                "late_s": round(late_s, 1),
                "attempts": close.attempts + 1,
            },
        )


def _check(name: str, value: str, form: re.Pattern[str]) -> None:
    if not form.match(value):
        raise ValidationFailed.of([(name, "is not a hub id of this form")])


def _pending_of(close: PendingClose) -> HubPendingClose:
    return HubPendingClose(
        entity_id=close.entity_id,
        farm_id=close.farm_id,
        close_at=iso(close.close_at),
        next_try_at=iso(close.next_try_at),
        attempts=close.attempts,
        last_error=close.last_error,
    )


def _irrigation_service(
    entity_id: str, action: str, position: int | None
) -> tuple[str, str, dict[str, Any]]:
    domain = entity_id.split(".", 1)[0]
    if domain == "valve":
        if action == "position":
            return "valve", "set_valve_position", {"position": position}
        return "valve", "open_valve" if action == "open" else "close_valve", {}
    return "switch", "turn_on" if action == "open" else "turn_off", {}
