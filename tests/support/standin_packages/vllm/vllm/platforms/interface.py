from typing import NamedTuple


class DeviceCapability(NamedTuple):
    major: int
    minor: int
