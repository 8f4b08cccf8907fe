"""User-facing errors: one sentence that names what is wrong and how to fix it."""


class ForgeBenchError(Exception):
    """An error a user can fix; the CLI and the suite print its message alone, no traceback."""


class SettingOutOfRange(ValueError):
    """A setting of the right type but outside what it may be; the config names where it came from."""

    def __init__(self, key: str, value: object, expected: str):
        super().__init__(f"{key} is {value!r}, but it must be {expected}")
        self.key, self.value, self.expected = key, value, expected


def require(record: object, group: str, checks: dict[str, tuple[bool, str]]) -> None:
    """Raise for the first setting of `record` whose check failed: {field: (ok, what it must be)}."""
    for name, (ok, expected) in checks.items():
        if not ok:
            raise SettingOutOfRange(f"{group}.{name}", getattr(record, name), expected)


def first_line(text: str) -> str:
    """A message's first line (an error's or a reason's headline), "" for an empty one."""
    return text.strip().splitlines()[0] if text.strip() else ""
