"""The type stubs of the extension module (kiln/_kiln.pyi) list exactly what it defines."""
import ast
import inspect
import os

import kiln
from kiln import _kiln


def stub_names(tree):
    names = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            names[node.name] = None
        elif isinstance(node, ast.ClassDef):
            names[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
    return names


def test_stub_matches_the_module():
    path = os.path.join(os.path.dirname(kiln.__file__), "_kiln.pyi")
    with open(path) as f:
        stubs = stub_names(ast.parse(f.read()))
    public = {n for n in dir(_kiln) if not n.startswith("_")}
    assert set(stubs) == public
    for name, members in stubs.items():
        if members is None:
            continue
        cls = getattr(_kiln, name)
        have = {n for n, _ in inspect.getmembers(cls) if not n.startswith("_")} | {"__init__"}
        assert members == have, name


def test_package_is_typed():
    assert os.path.exists(os.path.join(os.path.dirname(kiln.__file__), "py.typed"))
