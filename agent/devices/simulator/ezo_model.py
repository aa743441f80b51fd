"""Physics and calibration state of a simulated EZO pH or EC circuit with its probe.

The probe produces a raw signal from the simulated solution (a glass electrode's millivolts, a
conductivity cell's uncompensated conductance); the circuit turns it into a reading with its
temperature compensation and whatever calibration points it holds. Calibrating captures the raw
signal at that moment, as the real circuit does.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = ["EcModel", "PhModel", "nernst_mv_per_ph"]

# R * ln(10) / F in mV per kelvin: the ideal glass-electrode slope is 59.16 mV/pH at 25 degC.
_NERNST_MV_PER_K = 0.198416


def nernst_mv_per_ph(celsius: float) -> float:
    """Ideal electrode slope in mV per pH unit at `celsius`."""
    return _NERNST_MV_PER_K * (celsius + 273.15)


@dataclass
class PhModel:
    """A pH probe in a solution, behind an EZO-pH circuit."""

    rng: random.Random
    solution_ph: float = 7.0
    solution_temp_c: float = 25.0
    # A used glass electrode: a few mV of asymmetry and slightly under-Nernstian slopes.
    probe_offset_mv: float = 6.0
    probe_acid_efficiency: float = 0.975
    probe_base_efficiency: float = 0.985
    noise_mv: float = 0.2
    compensation_c: float = 25.0
    mid: tuple[float, float] | None = None  # (reference pH, mV)
    acid_efficiency: float | None = None  # set by Cal,low
    base_efficiency: float | None = None  # set by Cal,high

    def probe_mv(self) -> float:
        """The electrode's potential now, noise included."""
        delta = self.solution_ph - 7.0
        efficiency = self.probe_acid_efficiency if delta < 0 else self.probe_base_efficiency
        ideal = nernst_mv_per_ph(self.solution_temp_c)
        return self.probe_offset_mv - efficiency * ideal * delta + self.rng.gauss(0, self.noise_mv)

    def reading(self) -> float:
        """The pH the circuit reports for the current probe potential."""
        mv = self.probe_mv()
        mid_ph, mid_mv = self.mid if self.mid is not None else (7.0, 0.0)
        acid = mv > mid_mv  # acids drive a glass electrode positive
        efficiency = (self.acid_efficiency if acid else self.base_efficiency) or 1.0
        ph = mid_ph - (mv - mid_mv) / (efficiency * nernst_mv_per_ph(self.compensation_c))
        return min(14.0, max(0.0, ph))

    def calibrate(self, point: str, reference: float) -> bool:
        """Take a calibration point at the current potential; False if the circuit refuses."""
        if not 0.0 < reference < 14.0:
            return False
        mv = self.probe_mv()
        if point == "mid":
            # Datasheet EZO-pH, "Cal" command: calibrating mid clears the low and high points.
            self.mid = (reference, mv)
            self.acid_efficiency = self.base_efficiency = None
            return True
        mid_ph, mid_mv = self.mid if self.mid is not None else (7.0, 0.0)
        if (point == "low" and reference >= mid_ph) or (point == "high" and reference <= mid_ph):
            return False
        efficiency = (mid_mv - mv) / ((reference - mid_ph) * nernst_mv_per_ph(self.compensation_c))
        if point == "low":
            self.acid_efficiency = efficiency
        else:
            self.base_efficiency = efficiency
        return True

    def clear(self) -> None:
        """Forget every calibration point."""
        self.mid = None
        self.acid_efficiency = self.base_efficiency = None

    @property
    def points(self) -> int:
        """How many calibration points are held (the `Cal,?` answer)."""
        held = (self.mid, self.acid_efficiency, self.base_efficiency)
        return sum(1 for value in held if value is not None)

    def slope(self) -> tuple[float, float, float]:
        """Acid %, base % and zero offset mV (the `Slope,?` answer)."""
        acid = (self.acid_efficiency or 1.0) * 100.0
        base = (self.base_efficiency or 1.0) * 100.0
        return acid, base, self.mid[1] if self.mid is not None else 0.0


@dataclass
class EcModel:
    """A conductivity probe in a solution, behind an EZO-EC circuit (values in uS/cm)."""

    rng: random.Random
    solution_ec_us: float = 1413.0  # at 25 degC; 0 means the probe is dry
    solution_temp_c: float = 25.0
    probe_gain: float = 1.06
    probe_dry_us: float = 2.5
    noise_fraction: float = 0.002
    compensation_c: float = 25.0
    probe_k: float = 1.0
    tds_factor: float = 0.54
    outputs: list[str] = field(default_factory=lambda: ["EC", "TDS", "S", "SG"])
    zero: float = 0.0
    single: tuple[float, float] | None = None  # (compensated raw, reference)
    low: tuple[float, float] | None = None
    high: tuple[float, float] | None = None

    def _raw(self) -> float:
        # Conductivity rises about 2 % per degree C (the EZO-EC's compensation coefficient).
        at_temp = self.solution_ec_us * (1 + 0.02 * (self.solution_temp_c - 25.0))
        value = at_temp * self.probe_gain + self.probe_dry_us
        return value * (1 + self.rng.gauss(0, self.noise_fraction))

    def _compensated(self) -> float:
        return (self._raw() - self.zero) / (1 + 0.02 * (self.compensation_c - 25.0))

    def conductivity(self) -> float:
        """The conductivity the circuit reports, in uS/cm at 25 degC."""
        x = self._compensated()
        if self.low is not None and self.high is not None:
            (x0, y0), (x1, y1) = self.low, self.high
            value = y0 + (x - x0) * (y1 - y0) / (x1 - x0)
        elif self.single is not None or self.low is not None:
            raw, reference = self.single or self.low or (1.0, 1.0)
            value = x * reference / raw
        else:
            value = x
        return max(0.0, value)

    def reading_fields(self) -> list[str]:
        """The `R` reply fields for the enabled outputs, formatted like the circuit."""
        ec = self.conductivity()
        # Practical-salinity and specific-gravity approximations; good enough for a simulator.
        salinity = 0.4665 * (ec / 1000.0) ** 1.0878
        values = {
            "EC": _format_ec(ec),
            "TDS": _format_ec(ec * self.tds_factor),
            "S": f"{salinity:.2f}",
            "SG": f"{1.0 + salinity * 0.00075:.3f}",
        }
        return [values[name] for name in self.outputs]

    def calibrate(self, point: str, reference: float | None) -> bool:
        """Take a calibration point now; False if the circuit refuses it."""
        if point == "dry":
            self.zero = self._raw()
            return True
        if reference is None or reference <= 0:
            return False
        taken = (self._compensated(), reference)
        if taken[0] <= 0:
            return False
        if point == "single":
            self.single, self.low, self.high = taken, None, None
        elif point == "low":
            self.single, self.low, self.high = None, taken, None
        elif point == "high":
            if self.low is not None and (reference <= self.low[1] or taken[0] <= self.low[0]):
                return False
            self.single, self.high = None, taken
        else:
            return False
        return True

    def clear(self) -> None:
        """Forget every calibration point, the dry point included."""
        self.zero = 0.0
        self.single = self.low = self.high = None

    @property
    def points(self) -> int:
        """How many solution points are held (the `Cal,?` answer; dry is not counted)."""
        return sum(1 for value in (self.single, self.low, self.high) if value is not None)


def _format_ec(value: float) -> str:
    # The EZO-EC prints fewer decimals as the value grows.
    if value < 100:
        return f"{value:.2f}"
    if value < 1000:
        return f"{value:.1f}"
    return f"{value:.0f}"
