"""A run-time watch on the questions a candidate asks about being observed: whether a dispatch or
torch-function mode is on the stack, whether the profiler runs, whether it is traced or compiled,
which trace hooks the interpreter has.

Every call of a candidate is watched alike (candidate_run.Watched), so an honest kernel has no
reason to ask; the source audit (audit.py) names the literal spellings, and this catches the ones
built at run time (getattr(torch._C, "_len_" + ...)). Each query is replaced, in the worker and
before the candidate loads, by a wrapper that notes a call made from code outside the trusted
installation (torch's own Python asks these all the time, and is not noted).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from pathlib import Path

QUERIES = (
    "torch._C._len_torch_dispatch_stack",
    "torch._C._get_dispatch_stack_at",
    "torch._C._get_dispatch_mode",
    "torch._C._is_torch_function_mode_enabled",
    "torch._C._len_torch_function_stack",
    "torch._C._get_function_stack_at",
    "torch._C._dispatch_tls_is_dispatch_key_included",
    "torch._C._dispatch_tls_local_include_set",
    "torch._C._dispatch_tls_local_exclude_set",
    "torch._C._autograd._profiler_enabled",
    "torch._C._get_tracing_state",
    "torch.utils._python_dispatch._get_current_dispatch_mode",
    "torch.utils._python_dispatch._get_current_dispatch_mode_stack",
    "torch.utils._python_dispatch.is_in_torch_dispatch_mode",
    "torch.compiler.is_compiling",
    "torch.compiler.is_dynamo_compiling",
    "torch.jit.is_tracing",
    "sys.gettrace",
    "sys.getprofile",
    # Taking the dispatcher's observer off its stack, or the profiler's session from under it.
    "torch._C._pop_torch_dispatch_stack",
    "torch._C._push_on_torch_dispatch_stack",
    "torch._C._set_dispatch_mode",
    "torch._C._unset_dispatch_mode",
    "torch._C._autograd._enable_profiler",
    "torch._C._autograd._disable_profiler",
    "torch._C._autograd._prepare_profiler",
    "torch._C._autograd._profiler_type",
    "torch._C._autograd._kineto_step",
    # The interpreter's frames by other names than the audit's.
    "sys._getframe",
    "traceback.extract_stack",
    "traceback.walk_stack",
    "traceback.format_stack",
    "traceback.print_stack",
    "inspect.stack",
    "inspect.currentframe",
    "inspect.getouterframes",
)

ASKED: dict[str, str] = {}  # the queries a candidate made, in first-asked order, with the file that asked
_OWNERS = ("torch", "sys", "traceback", "inspect")


def _trusted_roots() -> tuple[str, ...]:
    """Where code is the installation's, not the candidate's: the interpreter's prefixes, the
    harness, and every folder on sys.path before the candidate loads (a package installed in a
    venv, for the user, or on PYTHONPATH: typing_extensions asks for frames whenever a TypeVar is
    made), except the worker's own folder and temporary folder, which the candidate can write."""
    import os

    import harness

    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(harness.__file__).resolve().parent)}
    # os.path's, not pathlib's: they answer False, not PermissionError, for a folder nobody may read.
    places = (os.getcwd(), os.environ.get("TMPDIR"), os.environ.get("HOME"))
    writable = [os.path.realpath(p) for p in places if p]
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        path = os.path.realpath(entry)
        if not any(path == w or path.startswith(w.rstrip("/") + "/") for w in writable):
            roots.add(entry)
    resolved = {os.path.realpath(r) for r in roots}
    return tuple(sorted({r.rstrip("/") + "/" for r in roots | resolved}))


_getframe = sys._getframe  # the wrapper's own, before sys._getframe is wrapped too
_getouterframes = inspect.getouterframes


def _wrap(name: str, query, trusted: tuple[str, ...]):
    answer = _FRAME_QUERIES.get(name, lambda query, args, kwargs: query(*args, **kwargs))

    @functools.wraps(query)
    def watched_query(*args, **kwargs):
        caller = _getframe(1).f_code.co_filename
        if not caller.startswith(trusted):
            ASKED.setdefault(name, caller)
        return answer(query, args, kwargs)

    return watched_query


def _from_caller(query, args, kwargs):
    """A stack query given no frame starts at its wrapper's caller (frame 2 here), not at the wrapper."""
    if (args[0] if args else kwargs.get("f")) is None:
        args, kwargs = (_getframe(2), *args[1:]), {k: v for k, v in kwargs.items() if k != "f"}
    return query(*args, **kwargs)


# The queries that answer with frames answer as if the wrapper were not there (from a function the
# wrapper calls, frame 0 is that function, 1 the wrapper, 2 its caller). torch.fx.wrap, for one,
# refuses to run unless inspect.currentframe()'s caller is a module's top level, and a module that
# calls it may be imported after install(), by the reference, a baseline or the candidate.
_FRAME_QUERIES = {
    "sys._getframe": lambda query, args, kwargs: query((args[0] if args else 0) + 2, *args[1:], **kwargs),
    "inspect.currentframe": lambda query, args, kwargs: _getframe(2),
    "inspect.stack": lambda query, args, kwargs: _getouterframes(_getframe(2), *args, **kwargs),
    "traceback.extract_stack": _from_caller,
    "traceback.format_stack": _from_caller,
    "traceback.print_stack": _from_caller,
}


def install() -> None:
    """Replace each query that exists in this torch by its noting wrapper, under every name a module
    holds it by (torch.autograd._profiler_enabled is torch._C._autograd._profiler_enabled): once
    per process, before the candidate loads."""
    trusted = _trusted_roots()
    originals: dict[int, tuple[str, object]] = {}
    for path in QUERIES:
        module_name, attr = path.rsplit(".", 1)
        try:
            owner = importlib.import_module(module_name)
        except ImportError:
            continue
        query = getattr(owner, attr, None)
        if callable(query) and not hasattr(query, "__wrapped__"):
            originals[id(query)] = (path, query)
    wrappers = {key: _wrap(path, query, trusted) for key, (path, query) in originals.items()}
    for module in [sys, *list(sys.modules.values())]:
        names = getattr(module, "__dict__", None)
        if not isinstance(names, dict) or not (getattr(module, "__name__", "") or "").startswith(_OWNERS):
            continue
        for name, value in list(names.items()):
            if id(value) in wrappers and value is originals[id(value)][1]:
                setattr(module, name, wrappers[id(value)])


def asked() -> str | None:
    """Why the candidate is rejected for asking, or None."""
    if not ASKED:
        return None
    return (
        f"the candidate asked whether it is observed ({', '.join(f'{q} from {f}' for q, f in ASKED.items())}); "
        "every call of it is observed "
        "alike, and a kernel that changes what it does when watched is not allowed"
    )
