"""The CPU: calls finish when they return, the host's clock times them (base.Device's defaults)."""

from harness.devices.base import Device

DEVICE = Device()
