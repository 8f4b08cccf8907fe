"""A source audit of a candidate, in the spirit of KernelBench's kernel_static_checker: the second
line of defence, never the only one (a name built at run time passes it).

The first line is that every call of the candidate is watched alike (candidate_run.Watched), so a
forward that asks whether it is observed gains nothing. A candidate that asks anyway is rejected
here: a kernel has no business reading the dispatcher's mode stack, the profiler's state, whether
it is being traced or compiled, or the interpreter's frames and hooks.
"""

from __future__ import annotations

import ast

# Attribute and function names that only matter to code that wants to know how it is run.
OBSERVERS = {
    "_len_torch_dispatch_stack": "the dispatcher's mode stack",
    "_get_dispatch_stack_at": "the dispatcher's mode stack",
    "_get_current_dispatch_mode": "the dispatcher's mode stack",
    "_get_current_dispatch_mode_stack": "the dispatcher's mode stack",
    "_python_dispatch": "the dispatcher's mode stack",
    "_is_torch_function_mode_enabled": "torch-function modes",
    "_get_function_stack_at": "torch-function modes",
    "_len_torch_function_stack": "torch-function modes",
    "_dispatch_tls_local_include_set": "the dispatcher's thread-local keys",
    "_dispatch_tls_local_exclude_set": "the dispatcher's thread-local keys",
    "_dispatch_tls_is_dispatch_key_included": "the dispatcher's thread-local keys",
    "_profiler_enabled": "whether the profiler is on",
    "_is_profiler_enabled": "whether the profiler is on",
    "is_profiler_enabled": "whether the profiler is on",
    "_kineto_step": "whether the profiler is on",
    "is_compiling": "whether it is being compiled",
    "is_dynamo_compiling": "whether it is being compiled",
    "is_tracing": "whether it is being traced",
    "_get_tracing_state": "whether it is being traced",
    "is_scripting": "whether it is being scripted",
    "gettrace": "the interpreter's trace hook",
    "getprofile": "the interpreter's profile hook",
    "_getframe": "the interpreter's frames",
    "currentframe": "the interpreter's frames",
    "stack": None,  # inspect.stack: only as an attribute of inspect (below)
    "get_objects": "the garbage collector's objects",
    "get_referrers": "the garbage collector's objects",
}
_MODULE_BOUND = {"stack": "inspect", "get_objects": "gc", "get_referrers": "gc", "currentframe": "inspect"}
_SUBCLASS_HOOKS = ("__torch_dispatch__", "__torch_function__")


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.alias):
        return node.name.rsplit(".", 1)[-1]
    return None


def _owner(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id
    return None


def audit(source: str) -> str | None:
    """Why the source must be rejected (what it reads, and where), or None. A source that does not
    parse is the compiler's to report, not the audit's."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in _SUBCLASS_HOOKS:
            return (
                f"line {node.lineno} defines {node.name}: a tensor subclass or mode of the candidate's own "
                "can defer or redirect work; kernels must return plain tensors"
            )
        if isinstance(node, (ast.ImportFrom, ast.Import)):
            module = getattr(node, "module", None) or ""
            if "_python_dispatch" in module or module.endswith("_C._profiler"):
                return (
                    f"line {node.lineno} imports {module}: a kernel has no use for the dispatcher's or profiler's state"
                )
            names = node.names
        else:
            names = [node]
        for item in names:
            name = _name(item)
            if name not in OBSERVERS:
                continue
            bound = _MODULE_BOUND.get(name)
            if bound and _owner(item) != bound and not (isinstance(node, ast.ImportFrom) and node.module == bound):
                continue
            what = OBSERVERS[name] or "the interpreter's frames"
            return (
                f"line {getattr(item, 'lineno', node.lineno)} reads {name} ({what}): a kernel behaves the same "
                "whether or not it is observed, so it has no reason to ask"
            )
    return None
