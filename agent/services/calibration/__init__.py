"""Sensor calibration: procedures, step-by-step sessions, the corrections applied to readings."""
