"""ragaudit's public names: served lazily at run time, declared with their types in `__init__.pyi`
for type checkers (tests/static holds the types under mypy); the two lists are one, and each name
a type checker sees is the object a caller gets."""

import ast
import importlib
from pathlib import Path

import pytest

import ragaudit
import ragaudit.adapters

PACKAGE = Path(ragaudit.__file__).parent


def declared(stub: Path) -> dict[str, tuple[str, str]]:
    """The names a stub declares: its public name -> (module, attribute) it is imported from."""
    found = {}
    for node in ast.parse(stub.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                found[alias.asname or alias.name] = (node.module, alias.name)
    return found


@pytest.mark.parametrize(
    ("package", "stub"),
    [(ragaudit, PACKAGE / "__init__.pyi"), (ragaudit.adapters, PACKAGE / "adapters" / "__init__.pyi")],
)
def test_every_public_name_is_declared_in_the_stub_as_the_object_served(package, stub):
    names = declared(stub)
    assert sorted(names) == sorted(package.__all__)
    assert sorted(dir(package)) == sorted(package.__all__)
    for name, (module, attribute) in names.items():
        assert getattr(package, name) is getattr(importlib.import_module(module), attribute), name
    stub_all = next(
        ast.literal_eval(node.value)
        for node in ast.parse(stub.read_text(encoding="utf-8")).body
        if isinstance(node, ast.Assign) and node.targets[0].id == "__all__"
    )
    assert sorted(stub_all) == sorted(package.__all__)


def test_a_misspelt_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="'gaet'"):
        ragaudit.gaet  # noqa: B018
    with pytest.raises(AttributeError, match="'from_langchian'"):
        ragaudit.adapters.from_langchian  # noqa: B018
