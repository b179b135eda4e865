"""The shape of the package: no import loop between its modules, counting the imports inside
functions, and no module over 500 lines."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ragaudit"


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _type_only(tree: ast.AST) -> set[int]:
    """The nodes under `if TYPE_CHECKING:`: names a type checker reads, which Python never imports."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            out |= {id(inner) for child in node.body for inner in ast.walk(child)}
    return out


def imports() -> dict[str, set[str]]:
    """Module → the modules it imports anywhere in its text (module level or inside functions).
    `from package import module` counts as importing the module; the package is only its parent.
    An import under `if TYPE_CHECKING:` is not one: Python never runs it, so it can make no loop
    (a registry low in the house may name the types of the modules that read it)."""
    known = modules()

    def owner(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = _type_only(tree)
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = [f"{node.module}.{a.name}" for a in node.names]
                targets = [t for t in subs if t in known]
                if len(targets) < len(subs):
                    targets.append(node.module)
            else:
                continue
            graph[name] |= {o for t in targets if t.startswith("ragaudit") and (o := owner(t)) and o != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_loops_counting_imports_inside_functions():
    graph = imports()
    assert cycles(graph) == []
    # nor between subpackages: each top-level unit (ragaudit.X) only ever imports downwards
    unit = lambda m: ".".join(m.split(".")[:2])  # noqa: E731
    units = {unit(m): set() for m in graph}
    for m, targets in graph.items():
        units[unit(m)] |= {unit(t) for t in targets if unit(t) != unit(m) and unit(t) != "ragaudit"}
    units.pop("ragaudit", None)
    assert cycles({u: {t for t in ts if t in units} for u, ts in units.items()}) == []


def test_the_checker_finds_a_loop():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_checker_leaves_out_only_what_a_type_checker_alone_imports():
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import a\nelse:\n    import b\nimport c\n"
    )
    skipped = _type_only(tree)
    names = [n.names[0].name for n in ast.walk(tree) if isinstance(n, ast.Import) and id(n) not in skipped]
    assert sorted(names) == ["b", "c"]


def test_no_module_is_over_500_lines():
    long = {name: n for name, path in modules().items() if (n := len(path.read_text().splitlines())) > 500}
    assert long == {}


def test_the_renderers_only_render():
    """ragaudit.outputs.render audits nothing, runs nothing and writes no run directory."""
    graph = imports()
    reached = {t for m, targets in graph.items() if m.startswith("ragaudit.outputs.render") for t in targets}
    assert not reached & {
        "ragaudit.auditing.audit",
        "ragaudit.io.rundir",
        "ragaudit.outputs.writing",
        "ragaudit.pipelines.runner",
        "ragaudit.flows.app",
    }


CLI_LAYER = ("cli/commands.py", "cli/options.py")  # the modules whose job is click commands and options


def _imports_click(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        names += [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
        if any(n.split(".")[0] == "click" for n in names):
            return True
    return False


def test_the_cli_layer_is_at_most_450_lines():
    """The command line only parses, calls the library and prints: 450 lines in all, as `wc -l` counts them."""
    lines = {name: (PACKAGE / name).read_bytes().count(b"\n") for name in CLI_LAYER}
    assert sum(lines.values()) <= 450, lines


def test_only_the_cli_layer_imports_click():
    """No other module holds commands or options, the adapters' included."""
    clicking = {str(path.relative_to(PACKAGE)) for name, path in modules().items() if _imports_click(path)}
    assert clicking == set(CLI_LAYER)


def test_no_test_can_hang_the_suite(pytestconfig):
    """pytest-timeout is on, with a bound on every test and the method that fails only that test."""
    assert pytestconfig.pluginmanager.hasplugin("timeout")
    assert 0 < float(pytestconfig.getini("timeout")) <= 900
    assert pytestconfig.getini("timeout_method") == "signal"


def _layout_rooms() -> list[str]:
    """The rooms of `ragaudit/` in the order the README's Layout names them."""
    import re

    from helpers import readme_layout

    package = re.search(r"^ragaudit/ (.*?)\n(?=\S)", readme_layout(), re.S | re.M).group(1)
    return re.findall(r"(?<![\w/.-])([a-z_]+)/", package)


def test_the_readme_layout_names_every_room_in_the_order_they_import():
    """A newcomer reads the rooms top-down: the Layout names each package of `ragaudit/` once, and a
    room imports only rooms named before it (imports inside functions counted)."""
    rooms = _layout_rooms()
    packages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    assert sorted(rooms) == packages and len(rooms) == len(set(rooms))
    unit = lambda m: m.split(".")[1] if m.count(".") else None  # noqa: E731
    upward = sorted(
        f"{m} -> {t}"
        for m, targets in imports().items()
        for t in targets
        if unit(m) in rooms and unit(t) in rooms and rooms.index(unit(t)) > rooms.index(unit(m))
    )
    assert upward == []


def test_at_most_twelve_top_level_modules_and_packages():
    entries = [p.name for p in PACKAGE.iterdir() if p.name != "__init__.py" and p.name != "__pycache__"]
    entries = [n for n in entries if n.endswith(".py") or (PACKAGE / n / "__init__.py").is_file()]
    assert len(entries) <= 12, sorted(entries)
