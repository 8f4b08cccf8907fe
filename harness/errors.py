"""User-facing errors: one sentence that names what is wrong and how to fix it."""


class ForgeBenchError(Exception):
    """An error a user can fix; the CLI and the suite print its message alone, no traceback."""
