"""Actuator control: commands, fan control by hand, daily schedules."""
