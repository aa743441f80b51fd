"""/api/v1/modbus/scans: ask a Modbus bus which devices answer (a thin handler over scan_bus);
each one is also listed under Found, where a person adds it to a place."""

from __future__ import annotations

from aiohttp import web

from agent.devices.found import Candidate
from agent.devices.modbus.bus import BusAddress, ModbusBus, ModbusFailure
from agent.devices.modbus.scan import ModbusCandidate, scan_bus
from agent.web.keys import DEVICE_RUNTIME, DEVICES, FOUND
from protocol.access import require_role
from protocol.errors import ValidationFailed
from protocol.http.endpoints import Api, principal_of
from protocol.identity import Role
from protocol.schemas.devices import ModbusAddress
from protocol.schemas.modbus import ModbusCandidateView, ModbusScanCreate, ModbusScanResult
from protocol.timefmt import utcnow

api = Api()


@api.route(
    "POST",
    "/api/v1/modbus/scans",
    summary="Scan a Modbus bus for devices",
    tag="Devices",
    body=ModbusScanCreate,
    response=ModbusScanResult,
    errors=(403,),
)
async def create_scan(request: web.Request, body: ModbusScanCreate) -> ModbusScanResult:
    """Ask each unit id in the range for the registers of each shipped Modbus profile and answer
    the devices that replied sensibly, with the profile and address to register them by. A bus
    the agent already polls is scanned between its polls, never over them. A bus that cannot
    be opened (no such port, no answer from the host) is a 422 naming ``port`` or ``host``."""
    require_role(principal_of(request), Role.ADMIN, Role.FARM_MANAGER)
    if body.port is not None:
        address = BusAddress(
            port=body.port,
            baudrate=body.baudrate,
            bytesize=body.bytesize,
            parity=body.parity,
            stopbits=body.stopbits,
        )
    else:
        address = BusAddress(host=body.host, tcp_port=body.tcp_port)
    runtime = request.app.get(DEVICE_RUNTIME)
    open_bus = runtime.modbus.bus(address.key) if runtime is not None else None
    bus = open_bus or ModbusBus(address, now=utcnow, timeout=body.timeout_s)
    units = range(body.first_unit, body.last_unit + 1)
    try:
        found = await scan_bus(bus, units, request.app[DEVICES].profiles, timeout=body.timeout_s)
    except ModbusFailure as failure:
        # The bus named cannot be opened (no such port, host not answering): the input's fault.
        field = "port" if body.port is not None else "host"
        raise ValidationFailed.of([(field, str(failure))], "Cannot open the bus") from None
    finally:
        if open_bus is None:
            await bus.close()
    candidates = [
        ModbusCandidateView(
            key=c.key,
            unit=c.unit,
            profile=c.profile_id,
            address=ModbusAddress.model_validate(c.address),
            readings=c.readings,
            other_profiles=list(c.other_profiles),
            found_id=await _list_under_found(request, c),
        )
        for c in found
    ]
    return ModbusScanResult(candidates=candidates, scanned=len(units))


async def _list_under_found(request: web.Request, candidate: ModbusCandidate) -> str | None:
    """List a device that answered under Found (as devices that announce themselves are)."""
    found = request.app.get(FOUND)
    if found is None:
        return None
    profile = request.app[DEVICES].profiles[candidate.profile_id]
    return await found.announce(
        Candidate(
            source=candidate.source,
            key=candidate.key,
            profile_id=candidate.profile_id,
            address=candidate.address,
            name=f"{profile.name} #{candidate.unit}",
            readings={
                name: value
                for name, value in candidate.readings.items()
                if isinstance(value, int | float) and not isinstance(value, bool)
            },
            model=profile.name,
        )
    )
