"""Modbus RTU (RS-485) and Modbus TCP devices, spoken through pymodbus (docs/adr/0071)."""
