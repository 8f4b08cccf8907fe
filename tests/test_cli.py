"""The CLI's own start-up: its parser and every command's --help import none of the heavy libraries
(each handler imports what it needs), so a user's `forgebench --help` or typo answers at once."""

import json
import subprocess
import sys

from forgebench.cli import parser

# What a command's handler may import, never the parser: torch and the libraries on top of it,
# MLflow, Hydra, the model client, the plotting and table libraries, and the harness's heavy parts.
HEAVY = ("torch", "mlflow", "pandas", "hydra", "omegaconf", "litellm", "plotly", "numpy", "leaderboard")
HEAVY_HARNESS = ("harness.evaluate", "harness.agents", "harness.devices", "harness.session", "harness.record")

_HELP_AND_MODULES = """
import json, sys
from forgebench.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def _modules_after(*argv: str) -> tuple[str, set[str]]:
    """What `forgebench ARGV` printed and the modules its process had imported when it ended."""
    done = subprocess.run([sys.executable, "-c", _HELP_AND_MODULES, *argv], capture_output=True, text=True, timeout=120)
    return done.stdout, set(json.loads(done.stderr.strip().splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY or m.startswith(HEAVY_HARNESS))


def _commands() -> list[list[str]]:
    """Every command and sub-command the parser knows, less `run` (Hydra's own command line)."""
    top = parser()
    (sub,) = [a for a in top._actions if a.choices and a.dest == "command"]
    found = []
    for name, command in sub.choices.items():
        nested = [a for a in command._actions if a.dest == "action" and a.choices]
        found += [[name, action] for a in nested for action in a.choices] or [[name]]
    return [c for c in found if c != ["run"]]


def test_help_imports_none_of_the_heavy_libraries():
    printed, modules = _modules_after("--help")
    assert "leaderboard" in printed and "regrade" in printed
    assert _heavy(modules) == []


def test_every_commands_help_imports_none_of_the_heavy_libraries():
    commands = _commands()
    assert ["tasks", "validate"] in commands and ["regrade"] in commands
    for command in commands:
        printed, modules = _modules_after(*command, "--help")
        assert printed.startswith(f"usage: forgebench {' '.join(command)}"), printed
        assert _heavy(modules) == [], command


def test_an_unknown_device_for_tasks_validate_is_one_sentence(tmp_path, capsys):
    from forgebench.cli import main

    assert main(["tasks", "validate", "--run", "tpu", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert "--run tpu" in error and "cpu" in error and error.count("\n") == 1
