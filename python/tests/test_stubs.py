"""The type stubs (python/fheplan/*.pyi) describe the module that runs: every public name of
the package and every public method and attribute of its classes is in the stubs, nothing in
the stubs is missing at run time, and where a callable has a signature at run time
(__text_signature__, or Python code) its parameters are the stub's, with the same names,
kinds and defaults present."""

import ast
import dataclasses
import inspect
import os
from typing import Any, Dict, List, Optional, Tuple

import pytest

import fheplan
from fheplan import _fheplan

PKG = os.path.join(os.environ.get("FHEPLAN_REPO", os.path.join(os.path.dirname(__file__),
                                                                "..", "..")), "python", "fheplan")
# Names the stubs declare for type checkers only (records are SimpleNamespace at run time).
STUB_ONLY_PREFIX = "_"
# What a type-checker-only class of the stubs may name that the runtime object lacks.
NOT_AT_RUNTIME = {"__hash__", "__eq__", "__ne__", "__init__", "__new__"}

Params = List[Tuple[str, str, bool]]


def parse(name: str) -> ast.Module:
    with open(os.path.join(PKG, name), encoding="utf-8") as f:
        return ast.parse(f.read(), name)


def stub_names(tree: ast.Module) -> Dict[str, ast.AST]:
    out: Dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.asname is not None:  # an explicit re-export (X as X)
                    out[a.asname] = node
    return out


INIT = stub_names(parse("__init__.pyi"))
CORE = stub_names(parse("_fheplan.pyi"))


def stub_of(name: str) -> Optional[ast.AST]:
    node = INIT.get(name)
    if isinstance(node, ast.ImportFrom):
        return CORE.get(name)
    return node


def members(cls: ast.ClassDef) -> Dict[str, ast.AST]:
    out: Dict[str, ast.AST] = {}
    for node in cls.body:
        if isinstance(node, ast.FunctionDef):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out[node.target.id] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out[t.id] = node
    return out


def stub_params(fn: ast.FunctionDef) -> Params:
    a = fn.args
    pos = a.posonlyargs + a.args
    defaults = [False] * (len(pos) - len(a.defaults)) + [True] * len(a.defaults)
    out: Params = [(p.arg, "POSITIONAL_ONLY" if p in a.posonlyargs else "POSITIONAL_OR_KEYWORD",
                    d) for p, d in zip(pos, defaults)]
    if a.vararg:
        out.append((a.vararg.arg, "VAR_POSITIONAL", False))
    out += [(p.arg, "KEYWORD_ONLY", d is not None) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        out.append((a.kwarg.arg, "VAR_KEYWORD", False))
    return [p for p in out if p[0] not in ("self", "cls")]


def runtime_params(obj: Any) -> Optional[Params]:
    try:
        sig = inspect.signature(obj)
    except (ValueError, TypeError):
        return None  # no __text_signature__: nothing to compare
    return [(p.name, p.kind.name, p.default is not inspect.Parameter.empty)
            for p in sig.parameters.values() if p.name not in ("self", "cls", "$self")]


def ours(name: str) -> bool:
    """fheplan's own names: not the helpers __init__.py imports (typing, dataclasses, enum)."""
    obj = getattr(fheplan, name)
    module = getattr(obj, "__module__", None)
    return not inspect.ismodule(obj) and (module is None or module.startswith("fheplan")
                                          or not (inspect.isclass(obj) or callable(obj)))


def public_runtime_names() -> List[str]:
    names = set(getattr(fheplan, "__all__", [])) | set(dir(fheplan))
    return sorted(n for n in names if not n.startswith("_") and ours(n))


@pytest.mark.parametrize("name", public_runtime_names())
def test_every_public_name_is_in_the_stubs(name: str) -> None:
    assert stub_of(name) is not None, f"fheplan.{name} is not in python/fheplan/__init__.pyi"


def test_every_stub_name_exists_at_run_time() -> None:
    for name in INIT:
        if not name.startswith(STUB_ONLY_PREFIX):
            assert hasattr(fheplan, name), f"__init__.pyi declares {name}; fheplan has none"
    for name, node in CORE.items():
        if not name.startswith(STUB_ONLY_PREFIX) or isinstance(node, ast.FunctionDef):
            assert hasattr(_fheplan, name), f"_fheplan.pyi declares {name}; the module lacks it"


def classes() -> List[str]:
    return [n for n in public_runtime_names() if inspect.isclass(getattr(fheplan, n))]


@pytest.mark.parametrize("name", classes())
def test_class_members_match(name: str) -> None:
    cls = getattr(fheplan, name)
    node = stub_of(name)
    assert isinstance(node, ast.ClassDef), f"{name} is not a class in the stubs"
    declared = members(node)
    if issubclass(cls, BaseException):
        return  # attributes are set per instance (status, message, ...)
    runtime = {n for n in vars(cls) if not n.startswith("_")}
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    runtime |= fields
    runtime |= {n for n in ("__getitem__", "__len__", "__iter__", "__enter__", "__exit__",
                            "__dlpack__", "__dlpack_device__") if n in vars(cls)}
    for n in runtime:
        if isinstance(vars(cls).get(n), (int, str)) and issubclass(cls, int):
            continue  # enum members: declared as assignments
        assert n in declared, f"{name}.{n} exists at run time but not in the stubs"
    for n in declared:
        if n in NOT_AT_RUNTIME or (n.startswith("_") and not n.startswith("__")):
            continue
        assert n in fields or hasattr(cls, n), \
            f"the stubs declare {name}.{n}; the runtime class lacks it"


def callables() -> List[Tuple[str, Any, ast.FunctionDef]]:
    out = []
    for name in public_runtime_names():
        obj, node = getattr(fheplan, name), stub_of(name)
        if isinstance(node, ast.FunctionDef):
            out.append((name, obj, node))
        elif isinstance(node, ast.ClassDef) and inspect.isclass(obj):
            for m, fn in members(node).items():
                if isinstance(fn, ast.FunctionDef) and m in vars(obj) and \
                        m not in ("__init__", "__new__") and not any(
                        isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list):
                    out.append((f"{name}.{m}", vars(obj)[m], fn))
            ctor = members(node).get("__init__") or members(node).get("__new__")
            if isinstance(ctor, ast.FunctionDef) and not issubclass(obj, BaseException):
                out.append((name, obj, ctor))
    return out


@pytest.mark.parametrize("name,obj,fn", callables(), ids=[c[0] for c in callables()])
def test_signatures_match_where_the_runtime_has_one(name: str, obj: Any,
                                                   fn: ast.FunctionDef) -> None:
    got = runtime_params(obj)
    if got is None:
        pytest.skip(f"{name} has no signature at run time")
    assert got == stub_params(fn), f"{name}: runtime {got} != stub {stub_params(fn)}"
