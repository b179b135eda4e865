"""ragaudit's public names: each imported by the package's `__init__.py` from the module that
defines it, so a type checker reads them as a caller gets them (tests/static holds the types under
mypy); `__all__` and `dir()` list exactly those, and there is no `__getattr__` behind them."""

import ast
import importlib
from pathlib import Path

import pytest

import ragaudit
import ragaudit.adapters

PACKAGE = Path(ragaudit.__file__).parent


def declared(init: Path) -> dict[str, tuple[str, str]]:
    """The names a package's `__init__.py` imports: its public name -> (module, attribute)."""
    found = {}
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                found[alias.asname or alias.name] = (node.module, alias.name)
    return found


@pytest.mark.parametrize(
    ("package", "init"),
    [(ragaudit, PACKAGE / "__init__.py"), (ragaudit.adapters, PACKAGE / "adapters" / "__init__.py")],
)
def test_every_public_name_is_imported_from_its_module_and_listed(package, init):
    names = declared(init)
    names.pop("annotations", None)  # `from __future__ import annotations`
    assert sorted(names) == sorted(package.__all__)
    assert sorted(dir(package)) == sorted(package.__all__)
    for name, (module, attribute) in names.items():
        assert getattr(package, name) is getattr(importlib.import_module(module), attribute), name
    assert not hasattr(package, "__getattr__")
    listed = next(
        ast.literal_eval(node.value)
        for node in ast.parse(init.read_text(encoding="utf-8")).body
        if isinstance(node, ast.Assign) and node.targets[0].id == "__all__"
    )
    assert sorted(listed) == sorted(package.__all__)


def test_a_misspelt_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="'gaet'"):
        ragaudit.gaet  # noqa: B018
    with pytest.raises(AttributeError, match="'from_langchian'"):
        ragaudit.adapters.from_langchian  # noqa: B018
