"""The house rules a new maintainer can still hold, read from the source itself.

Every app folder (a top-level folder holding the project's Python; not
tests/, bench/ or .venv) keeps what search/ keeps: a file one idea, at most
MAX_FILE_LINES lines, a function at most MAX_FUNCTION_LINES lines from its
`def` to its last line, no two modules that import each other, and imports
that point down the floors of docs/architecture.md ("Floors"). No database:
the files are parsed, never imported.
"""

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOT_APPS = {"tests", "bench", ".venv"}
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60
# Long by nature: settings in one env-driven file, the demo's hand-written data.
LONG_FILES = {"config/settings.py", "backlog/demo.py"}

# docs/architecture.md, "Floors": top first. An app imports only from floors below its own.
FLOORS = (
    ("config",),
    ("api", "mcp_bridge", "ui"),
    ("writeback",),
    ("connectors", "runtime", "saved", "triage"),
    ("accounts", "search"),
    ("backlog",),
)
FLOOR_OF = {app: len(FLOORS) - level for level, apps in enumerate(FLOORS) for app in apps}


@dataclass(frozen=True)
class Import:
    source: str  # the importing file, relative to ROOT
    line: int
    module: str  # the project module it imports

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"


def apps() -> list[str]:
    return sorted(
        folder.name
        for folder in ROOT.iterdir()
        if folder.is_dir()
        and folder.name not in NOT_APPS
        and not folder.name.startswith(".")
        and any(folder.rglob("*.py"))
    )


@cache
def sources() -> dict[str, Path]:
    """module name -> file, for every .py of every app folder."""
    found = {}
    for app in apps():
        for path in sorted((ROOT / app).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


@cache
def tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def project_module(name: str | None) -> str | None:
    """The project module `name` is or lies in (`a.b.C` -> `a.b`), or None outside the project."""
    modules = sources()
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> set[Import]:
    """The project modules `module` imports, at module level or inside a function,
    relative imports resolved."""
    path = sources()[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree(path)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module
            # `from a import b` depends on module a.b when there is one, else on a (b is a's name).
            names = [
                f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in sources() else origin for alias in node.names
            ]
        else:
            continue
        for name in names:
            target = project_module(name)
            if target and target != module:
                found.add(Import(relative(path), node.lineno, target))
    return found


@cache
def graph() -> dict[str, set[Import]]:
    return {module: imports_of(module) for module in sources()}


def test_every_app_folder_is_on_a_floor():
    unplaced = [app for app in apps() if app not in FLOOR_OF]
    assert not unplaced, (
        f"{', '.join(unplaced)}: not on any floor; add it to FLOORS here and to docs/architecture.md (Floors)"
    )


def test_a_file_is_at_most_400_lines():
    too_long = [
        f"{relative(path)}: {lines} lines"
        for path in sources().values()
        if "migrations" not in path.parts
        and relative(path) not in LONG_FILES
        and (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES
    ]
    assert not too_long, f"files over {MAX_FILE_LINES} lines (split each by its ideas): " + "; ".join(too_long)


def test_a_function_is_at_most_60_lines():
    too_long = [
        f"{relative(path)}:{node.lineno} {node.name}() is {node.end_lineno - node.lineno + 1} lines"
        for path in sources().values()
        for node in ast.walk(tree(path))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not too_long, (
        f"functions over {MAX_FUNCTION_LINES} lines, def to last line (break each into named steps): "
        + "; ".join(too_long)
    )


def test_no_modules_import_each_other():
    """Not directly, nor around a longer circle: each cycle named by its imports."""
    cycles = [", then ".join(f"{edge.where} imports {edge.module}" for edge in cycle) for cycle in import_cycles()]
    assert not cycles, "modules that import each other (move the shared piece down, or invert one): " + "; ".join(
        cycles
    )


def test_imports_point_down_the_floors():
    upward: dict[str, str] = {}  # where -> the module it imports (the longest name of one statement)
    for module, edges in graph().items():
        app = module.partition(".")[0]
        for edge in edges:
            other = edge.module.partition(".")[0]
            if other != app and app in FLOOR_OF and FLOOR_OF.get(other, 0) >= FLOOR_OF[app]:
                upward[edge.where] = max(upward.get(edge.where, ""), edge.module, key=len)
    assert not upward, "imports that do not point down (docs/architecture.md, Floors): " + "; ".join(
        f"{where} imports {target}: {where.partition('/')[0]} (floor {FLOOR_OF[where.partition('/')[0]]}) may "
        f"import only from floors below its own, and {target.partition('.')[0]} is on floor "
        f"{FLOOR_OF[target.partition('.')[0]]}"
        for where, target in sorted(upward.items())
    )


def import_cycles() -> list[list[Import]]:
    """One circle of imports for each group of modules that reach each other
    (Tarjan's strongly connected components, walked without recursion)."""
    edges = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(e.module for e in edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(e.module for e in edges[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)
    return [circle_in(group) for group in groups]


def circle_in(group: set[str]) -> list[Import]:
    """The imports of one circle through `group`, from its first module back to it."""
    start = min(group)
    paths = {start: []}
    waiting = [start]
    while waiting:  # breadth first: the shortest way back
        module = waiting.pop(0)
        for edge in sorted(graph()[module], key=lambda e: e.module):
            if edge.module == start:
                return [*paths[module], edge]
            if edge.module in group and edge.module not in paths:
                paths[edge.module] = [*paths[module], edge]
                waiting.append(edge.module)
    raise AssertionError(f"no circle through {start}")
