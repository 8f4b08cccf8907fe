"""The run-time watch on a candidate's questions about being observed (observers.py): a question
from the candidate's file is noted, and the questions answered with frames are answered as if no
wrapper stood between the caller and the interpreter, for the installation's code that asks them."""

import json
import subprocess
import sys

# Run as a file of a folder on sys.path before install(): the installation's code, as the worker's is.
CHECK = """
import inspect, json, sys, traceback
from harness.evaluate import observers

observers.install()
sys.path.insert(0, sys.argv[1])  # the candidate's folder, put there after install() as the worker does


def here():
    return {
        "getframe_0": sys._getframe(0).f_code.co_name,
        "getframe_1": sys._getframe(1).f_code.co_name,
        "currentframe": inspect.currentframe().f_code.co_name,
        "stack": inspect.stack()[0].function,
        "extract_stack": traceback.extract_stack()[-1].name,
        "format_stack": "in here" in traceback.format_stack()[-1],
    }


found = here()
found["asked_by_installation"] = observers.asked()
import late  # calls torch.fx.wrap at its top level: refused unless currentframe() is the module's

found["late"] = late.twice(3)
import candidate

found["candidate"] = candidate.ask()
found["asked"] = observers.asked()
print(json.dumps(found))
"""


def test_frame_questions_are_answered_as_if_unwatched_and_the_candidates_are_noted(tmp_path):
    trusted, folder = tmp_path / "installed", tmp_path / "candidate"
    trusted.mkdir()
    folder.mkdir()
    (trusted / "check.py").write_text(CHECK)
    (folder / "late.py").write_text("import torch\n\n\ndef twice(x):\n    return 2 * x\n\n\ntorch.fx.wrap('twice')\n")
    (folder / "candidate.py").write_text("import sys\n\n\ndef ask():\n    return sys._getframe(0).f_code.co_name\n")
    ran = subprocess.run(
        [sys.executable, str(trusted / "check.py"), str(folder)], cwd=folder, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    found = json.loads(ran.stdout.splitlines()[-1])
    asked = found.pop("asked")
    assert found == {
        "getframe_0": "here",
        "getframe_1": "<module>",
        "currentframe": "here",
        "stack": "here",
        "extract_stack": "here",
        "format_stack": True,
        "asked_by_installation": None,
        "late": 6,
        "candidate": "ask",
    }
    assert asked.startswith("the candidate asked whether it is observed (sys._getframe from ")
    assert str(folder / "candidate.py") in asked
