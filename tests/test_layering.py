"""The lab is a black box: code that grounds, demonstrates, stores or evaluates must not import it, nor reach into
an env's physics.

docs/concepts.md#the-lab: grounding code may step ``PickSort-Real-v0`` and read its datasets, never read the
lab's parameters; the package layout makes that visible and this test enforces it, in imports and in attribute
access.  Both are found by parsing the source with ``ast`` (imports in their absolute, relative and
``importlib.import_module("...")`` forms; attributes as ``x.attr`` and ``getattr(x, "attr")``), so a violation
anywhere in those packages fails here even if the module is never imported at test time.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "r2s2r_envs"
FORBIDDEN = "r2s2r_envs.lab"
# Packages that must not see the lab.  world/ and envs/ sit below it in the layering (docs/architecture.md).
# course/ is the teacher's side (its checker grades answers against the exercise labs) and may read them.
CHECKED_PACKAGES = ("grounding", "behavior", "datasets", "evaluation", "policies", "ablation", "world", "envs")
# Packages (and top-level folders) that must not read an env's physics: the attribute check below.
BLACK_BOX_USERS = ("grounding", "behavior", "datasets", "evaluation", "policies", "ablation")
BLACK_BOX_DIRS = ("baselines",)
# Attributes through which code could read a lab env's hidden world.  `x.unwrapped.model` / `.data` are caught
# as `.model` / `.data` reached through `.unwrapped`; the rest anywhere.
FORBIDDEN_ATTRIBUTES = ("world_params", "_lab", "_model", "_data", "_world")
FORBIDDEN_THROUGH_UNWRAPPED = ("model", "data")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(source: str, module: str, is_package: bool = False) -> set[str]:
    """Fully qualified names of everything ``source`` (the text of ``module``) imports."""
    tree = ast.parse(source)
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package.split(".")
                base_parts = base_parts[: len(base_parts) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # `from pkg import submodule`
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ("import_module", "__import__") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.add(arg.value)
    return found


def forbidden_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    return sorted(
        m for m in imported_modules(source, module, is_package) if m == FORBIDDEN or m.startswith(FORBIDDEN + ".")
    )


def forbidden_attributes(source: str) -> list[str]:
    """``line: expression`` for every forbidden attribute access in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            through_unwrapped = isinstance(node.value, ast.Attribute) and node.value.attr == "unwrapped"
            if node.attr in FORBIDDEN_ATTRIBUTES or (through_unwrapped and node.attr in FORBIDDEN_THROUGH_UNWRAPPED):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "hasattr", "setattr"):
            if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
                name = node.args[1].value
                if name in FORBIDDEN_ATTRIBUTES or name in FORBIDDEN_THROUGH_UNWRAPPED:
                    found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def _black_box_files() -> list[Path]:
    files = []
    for pkg in BLACK_BOX_USERS:
        files.extend(sorted((PACKAGE_DIR / pkg).rglob("*.py")))
    for folder in BLACK_BOX_DIRS:
        files.extend(sorted((PACKAGE_DIR.parent / folder).rglob("*.py")))
    return files


@pytest.mark.parametrize("path", _black_box_files(), ids=lambda p: str(p.relative_to(PACKAGE_DIR.parent)))
def test_no_physics_access(path):
    bad = forbidden_attributes(path.read_text())
    assert not bad, (
        f"{path.relative_to(PACKAGE_DIR.parent)} reads an env's physics ({bad}): the lab is a black box to this "
        "code (docs/concepts.md#the-lab); use the env's observations, provenance() or r2s2r_envs.world instead"
    )


@pytest.mark.parametrize(
    "source",
    [
        "env.unwrapped.model.body_mass",
        "m = env.unwrapped.data",
        "p = env.unwrapped.world_params",
        "p = base.world_params",
        "cfg = env.unwrapped._lab",
        "x = base._data.qpos",
        "getattr(env.unwrapped, 'world_params')",
        "getattr(base, 'model')",
        "def f(env):\n    return env.unwrapped._model",
    ],
)
def test_attribute_checker_catches_violations(source):
    assert forbidden_attributes(source) != []


@pytest.mark.parametrize(
    "source",
    [
        "env.unwrapped.provenance()",
        "env.unwrapped.domain",
        "self.model = model",
        "obs['world_params']",
        "env.unwrapped.scene.belt_top",
        "demo.settings",
    ],
)
def test_attribute_checker_allows_the_rest(source):
    assert forbidden_attributes(source) == []


def test_the_lab_refuses_what_the_checker_guards(make_env):
    # Defence in depth: even code that slipped past the checker gets an error from the lab itself.
    from r2s2r_envs.lab.lab_env import LabBoundaryError

    env = make_env("PickSort-Real-v0")
    for name in ("world_params", "model", "data"):
        with pytest.raises(LabBoundaryError):
            getattr(env.unwrapped, name)
    assert env.unwrapped._lab.name == "default"  # the lab's own code (and its tests) can still see it


def _checked_files() -> list[Path]:
    files = []
    for pkg in CHECKED_PACKAGES:
        files.extend(sorted((PACKAGE_DIR / pkg).rglob("*.py")))
    for folder in BLACK_BOX_DIRS:  # baselines/: scripts over the public API, lab included only as an env id
        files.extend(sorted((PACKAGE_DIR.parent / folder).rglob("*.py")))
    return files


def test_checked_packages_exist():
    for pkg in CHECKED_PACKAGES:
        assert (PACKAGE_DIR / pkg / "__init__.py").is_file(), f"r2s2r_envs/{pkg} is missing"
    assert (PACKAGE_DIR / "lab" / "__init__.py").is_file()


@pytest.mark.parametrize("path", _checked_files(), ids=lambda p: str(p.relative_to(PACKAGE_DIR.parent)))
def test_no_lab_import(path):
    module = _module_name(path) if path.is_relative_to(PACKAGE_DIR) else path.stem
    bad = forbidden_imports(path.read_text(), module, is_package=path.name == "__init__.py")
    assert not bad, f"{module} imports {bad}: the lab is a black box to this package (docs/concepts.md#the-lab)"


@pytest.mark.parametrize(
    "source",
    [
        "import r2s2r_envs.lab",
        "import r2s2r_envs.lab.config as c",
        "from r2s2r_envs.lab import load_lab",
        "from r2s2r_envs.lab.lab_env import LabEnv",
        "from r2s2r_envs import lab",
        "from .. import lab",
        "from ..lab.config import LabConfig",
        "def f():\n    from r2s2r_envs.lab import config",
        "import importlib\nimportlib.import_module('r2s2r_envs.lab.config')",
    ],
)
def test_checker_catches_violations(source):
    assert forbidden_imports(source, "r2s2r_envs.grounding.world_id") != []


@pytest.mark.parametrize(
    "source",
    [
        "import r2s2r_envs.envs",
        "from r2s2r_envs.world.params import WorldParams",
        "from .. import envs",
        "import labrador",
        "ENTRY = 'r2s2r_envs.lab.lab_env:LabEnv'",  # a registry string is not an import
    ],
)
def test_checker_allows_the_rest(source):
    assert forbidden_imports(source, "r2s2r_envs.grounding.world_id") == []


def test_importing_the_packages_does_not_load_the_lab():
    # Transitive check: importing everything that must not see the lab leaves it unloaded.
    modules = ["r2s2r_envs"] + [f"r2s2r_envs.{p}" for p in CHECKED_PACKAGES]
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        f"loaded = sorted(m for m in sys.modules if m == {FORBIDDEN!r} or m.startswith({FORBIDDEN!r} + '.'))\n"
        "print(loaded)\n"
        "sys.exit(1 if loaded else 0)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"importing {modules} loaded the lab: {result.stdout} {result.stderr}"


# ---------------------------------------------------------------------------------------------- layering
# The packages from the bottom up (docs/architecture.md#dependencies): a module imports only from its own package,
# from the layers below it, and from the foundation (the top-level helper modules: safe_json, provenance, ...).
# The commands sit on top: the root package (its __init__ registers the envs), r2s2r_envs/cli.py and every
# package's cli.py or *_cli.py; they may import anything, and only commands import them.  Every import counts:
# at top level, inside functions and under ``if TYPE_CHECKING:``.
LAYERS = ("world", "envs", "lab", "datasets", "behavior", "evaluation", "grounding", "policies", "ablation", "course")
FOUNDATION = "foundation"
COMMANDS = "commands"
# Upward imports waiting for their owners: (importer, imported) -> why.  Each must still be there (so the list only
# shrinks): delete an entry when its import goes.
PENDING_UPWARD: dict[tuple[str, str], str] = {
    ("r2s2r_envs.policies.train_data", "r2s2r_envs"): "a no-op `import r2s2r_envs` in a function (policies/ in rework)",
}


def _is_module(name: str) -> bool:
    path = PACKAGE_DIR.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def layer_of(module: str) -> str:
    """The layer of a module of the package: a package name of ``LAYERS``, ``FOUNDATION`` or ``COMMANDS``."""
    parts = module.split(".")
    if module in ("r2s2r_envs", "r2s2r_envs.cli") or parts[-1] == "cli" or parts[-1].endswith("_cli"):
        return COMMANDS
    if len(parts) == 2 and not (PACKAGE_DIR / parts[1]).is_dir():
        return FOUNDATION
    return parts[1]


def _rank(layer: str) -> int:
    return -1 if layer == FOUNDATION else len(LAYERS) if layer == COMMANDS else LAYERS.index(layer)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, with_type_checking: bool) -> Iterator[tuple[ast.AST, bool]]:
    """Every node under ``node`` with whether it runs inside a function; the bodies of ``if TYPE_CHECKING:`` only when
    ``with_type_checking`` (their ``else:`` always)."""
    stack: list[tuple[ast.AST, bool]] = [(node, False)]
    while stack:
        current, in_function = stack.pop()
        yield current, in_function
        if isinstance(current, ast.If) and _is_type_checking(current.test) and not with_type_checking:
            children: list[ast.AST] = list(current.orelse)
        else:
            children = list(ast.iter_child_nodes(current))
        inner = in_function or isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        stack.extend((child, inner) for child in reversed(children))


def package_import_sites(
    source: str, module: str, is_package: bool = False, *, with_type_checking: bool = True
) -> list[tuple[str, int, bool]]:
    """``(imported module, line, inside a function)`` for every import of the package's modules in ``source`` (the
    text of ``module``): at top level, in functions, and under ``if TYPE_CHECKING:`` when ``with_type_checking``.

    ``from pkg import name`` counts as importing ``pkg.name`` when that is a module, else ``pkg``; a bare
    ``import r2s2r_envs`` (or ``from r2s2r_envs import <attribute>``) imports the root package, a command.
    ``importlib.import_module("...")`` with a literal counts; a registry string (``"module:Class"``) does not.
    """
    package = module if is_package else module.rpartition(".")[0]
    found: list[tuple[str, int, bool]] = []
    for node, in_function in _walk(ast.parse(source), with_type_checking):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno, in_function) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                target = f"{base}.{alias.name}" if _is_module(f"{base}.{alias.name}") else base
                found.append((target, node.lineno, in_function))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ("import_module", "__import__") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.append((arg.value, node.lineno, in_function))
    return [site for site in found if site[0] == "r2s2r_envs" or site[0].startswith("r2s2r_envs.")]


def package_imports(source: str, module: str, is_package: bool = False) -> set[str]:
    """The modules of the package that ``source`` (the text of ``module``) imports, anywhere in it: at top level, in
    functions and under ``if TYPE_CHECKING:`` (see :func:`package_import_sites`)."""
    return {target for target, _, _ in package_import_sites(source, module, is_package)}


def _package_files() -> list[Path]:
    return sorted(PACKAGE_DIR.rglob("*.py"))


def _edges() -> list[tuple[str, str]]:
    edges = []
    for path in _package_files():
        module = _module_name(path)
        for target in sorted(package_imports(path.read_text(), module, path.name == "__init__.py")):
            edges.append((module, target))
    return edges


def upward_imports(edges: list[tuple[str, str]]) -> list[str]:
    """``importer -> imported (layer -> layer)`` for every import that does not go down the layers."""
    bad = []
    for src, dst in edges:
        a, b = layer_of(src), layer_of(dst)
        if a == COMMANDS or a == b or _rank(b) < _rank(a):
            continue
        bad.append(f"{src} -> {dst} ({a} -> {b})")
    return bad


def test_layers_are_the_documented_order():
    text = (PACKAGE_DIR.parent / "docs" / "architecture.md").read_text()
    assert " < ".join(LAYERS) in text, "docs/architecture.md#dependencies must state the layer order of this test"
    assert {layer_of(f"r2s2r_envs.{p.name}") for p in PACKAGE_DIR.iterdir() if (p / "__init__.py").is_file()} == set(
        LAYERS
    ), "every subpackage of r2s2r_envs has a place in LAYERS"


def test_no_upward_imports():
    edges = _edges()
    pending = [f"{src} -> {dst} ({layer_of(src)} -> {layer_of(dst)})" for src, dst in PENDING_UPWARD]
    for src, dst in PENDING_UPWARD:
        assert (src, dst) in edges, f"{src} no longer imports {dst}: delete it from PENDING_UPWARD"
    bad = [b for b in upward_imports(edges) if b not in pending]
    assert not bad, (
        "imports that go up (or sideways) the layers of docs/architecture.md#dependencies "
        f"({' < '.join(LAYERS)}, commands on top):\n" + "\n".join(bad)
    )


def test_no_import_cycle_between_packages():
    # Between the packages' library modules (commands sit on top by definition; upward imports into them fail above).
    graph: dict[str, set[str]] = {}
    for src, dst in _edges():
        a, b = layer_of(src), layer_of(dst)
        if COMMANDS not in (a, b) and a != b:
            graph.setdefault(a, set()).add(b)
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle = trail[trail.index(nxt) :] + [nxt] if nxt in trail else [node, nxt]
                pytest.fail(f"import cycle between packages: {' -> '.join(cycle)}")
            if nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


# ---------------------------------------------------------------------------------------------- module cycles
# No two modules of the package may import each other, directly or around a loop, counting the imports inside
# functions: an import moved into a function to get past a cycle hides it, it does not break it.  Type-only imports
# (``if TYPE_CHECKING:``) never run, so they make no cycle and are left out here (the layer checks above count
# them: a low layer naming a high layer's types still depends on it).  An import of ``a.b.c`` also runs the
# ``__init__`` of ``a.b`` and ``a``: those are edges too, except to the importer's own packages (already running).
Site = tuple[str, str, int, bool]  # importer, imported, line, inside a function


def module_graph(files: list[tuple[str, str, bool]]) -> dict[str, dict[str, list[Site]]]:
    """``{importer: {imported: [sites]}}`` of the runtime imports of ``files`` (``(module, source, is_package)``)."""
    graph: dict[str, dict[str, list[Site]]] = {}
    for module, source, is_package in files:
        edges = graph.setdefault(module, {})
        for target, line, in_function in package_import_sites(source, module, is_package, with_type_checking=False):
            parts = target.split(".")
            for name in (".".join(parts[:n]) for n in range(len(parts), 0, -1)):
                own_package = module == name or module.startswith(name + ".")
                if name != module and (name == target or not own_package):
                    edges.setdefault(name, []).append((module, target, line, in_function))
    return graph


def import_cycles(graph: dict[str, dict[str, list[Site]]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` with more than one module, each sorted (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, {})):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(cycles)


def _describe(cycle: list[str], graph: dict[str, dict[str, list[Site]]]) -> str:
    lines = [f"cycle of {len(cycle)} modules: {', '.join(cycle)}"]
    for src in cycle:
        for dst in sorted(set(graph.get(src, {})) & set(cycle)):
            for _, target, line, in_function in sorted(set(graph[src][dst])):
                via = f" (imports {target})" if target != dst else ""
                where = " inside a function" if in_function else ""
                lines.append(f"  {src}:{line} -> {dst}{via}{where}")
    return "\n".join(lines)


def test_no_import_cycle_between_modules():
    files = [(_module_name(p), p.read_text(), p.name == "__init__.py") for p in _package_files()]
    graph = module_graph(files)
    cycles = import_cycles(graph)
    assert not cycles, (
        "import cycles between the package's modules (function-level imports count; break a cycle by moving the "
        "shared piece into the lower module or a new one, or by passing a callable, not by hiding an import in a "
        "function):\n" + "\n".join(_describe(c, graph) for c in cycles)
    )


def _graph_of(sources: dict[str, str]) -> dict[str, dict[str, list[Site]]]:
    return module_graph([(module, source, False) for module, source in sources.items()])


def test_cycle_finder_counts_function_level_imports():
    graph = _graph_of(
        {
            "r2s2r_envs.grounding.result": "def f():\n    from r2s2r_envs.grounding.tuning import check_grid\n",
            "r2s2r_envs.grounding.tuning": "from r2s2r_envs.grounding.result import load_grounding\n",
            "r2s2r_envs.grounding.sysid": "from r2s2r_envs.grounding import tuning\n",
        }
    )
    assert import_cycles(graph) == [["r2s2r_envs.grounding.result", "r2s2r_envs.grounding.tuning"]]
    assert "inside a function" in _describe(import_cycles(graph)[0], graph)


def test_cycle_finder_finds_longer_loops_and_package_inits():
    loop = {
        "r2s2r_envs.policies.zoo": "import importlib\nimportlib.import_module('r2s2r_envs.policies.train')\n",
        "r2s2r_envs.policies.train": "from r2s2r_envs.policies.runtime import load_policy\n",
        "r2s2r_envs.policies.runtime": "from .zoo import resolve_checkpoint\n",
    }
    assert import_cycles(_graph_of(loop)) == [sorted(loop)]
    # Importing r2s2r_envs.evaluation.protocol runs r2s2r_envs/evaluation/__init__.py, which imports back.
    inits = module_graph(
        [
            ("r2s2r_envs.evaluation", "from r2s2r_envs.evaluation.protocol import evaluate\n", True),
            ("r2s2r_envs.evaluation.protocol", "from r2s2r_envs.policies.zoo import resolve_checkpoint\n", False),
            ("r2s2r_envs.policies.zoo", "def f():\n    from r2s2r_envs.evaluation.results import x\n", False),
        ]
    )
    assert import_cycles(inits) == [
        ["r2s2r_envs.evaluation", "r2s2r_envs.evaluation.protocol", "r2s2r_envs.policies.zoo"]
    ]


@pytest.mark.parametrize(
    "back",
    [
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from r2s2r_envs.grounding.tuning import x\n",
        "import typing\nif typing.TYPE_CHECKING:\n    from r2s2r_envs.grounding.tuning import x\n",
        "ENTRY = 'r2s2r_envs.grounding.tuning:tune_planner'\n",  # a registry string is not an import
    ],
)
def test_cycle_finder_leaves_out_what_does_not_run(back):
    graph = _graph_of(
        {
            "r2s2r_envs.grounding.result": back,
            "r2s2r_envs.grounding.tuning": "from r2s2r_envs.grounding.result import load_grounding\n",
        }
    )
    assert import_cycles(graph) == []


def test_cycle_finder_leaves_out_the_importers_own_package():
    # grounding/__init__.py imports result, result imports a sibling: the package's __init__ is already running.
    graph = module_graph(
        [
            ("r2s2r_envs.grounding", "from r2s2r_envs.grounding.result import load_grounding\n", True),
            ("r2s2r_envs.grounding.result", "def f():\n    from r2s2r_envs.grounding.logs import LogError\n", False),
        ]
    )
    assert import_cycles(graph) == []
    assert set(graph["r2s2r_envs.grounding.result"]) == {"r2s2r_envs.grounding.logs"}


def test_type_checking_imports_still_count_for_the_layers():
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from r2s2r_envs.policies import zoo\n"
    assert package_imports(source, "r2s2r_envs.datasets.reader") == {"r2s2r_envs.policies.zoo"}
    assert package_import_sites(source, "r2s2r_envs.datasets.reader", with_type_checking=False) == []


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("r2s2r_envs.behavior.segments", "r2s2r_envs.datasets"),  # allowed: datasets sits below behavior
        ("r2s2r_envs.evaluation_cli", "r2s2r_envs.policies"),  # a command may import anything
        ("r2s2r_envs.grounding.excitation", "r2s2r_envs.envs.hand"),
    ],
)
def test_layer_checker_allows_downward_imports(importer, imported):
    assert upward_imports([(importer, imported)]) == []


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("r2s2r_envs.datasets.generate", "r2s2r_envs.behavior"),  # the cycle this test removed
        ("r2s2r_envs.lab.teleop", "r2s2r_envs.datasets.reader"),  # lab sits below datasets
        ("r2s2r_envs.datasets.canonical", "r2s2r_envs"),  # `import r2s2r_envs  # registers the envs`
        ("r2s2r_envs.grounding.sysid", "r2s2r_envs.grounding.fit_cli"),  # a library importing a command
        ("r2s2r_envs.safe_json", "r2s2r_envs.world.params"),  # the foundation imports nothing above it
    ],
)
def test_layer_checker_catches_upward_imports(importer, imported):
    assert upward_imports([(importer, imported)]) != []


def test_package_imports_reads_every_form():
    source = (
        "import r2s2r_envs\nfrom r2s2r_envs import behavior\nfrom ..datasets import reader\n"
        "def f():\n    from r2s2r_envs.envs.hand import down_quat\n"
        "import importlib\nimportlib.import_module('r2s2r_envs.world.params')\n"
    )
    assert package_imports(source, "r2s2r_envs.grounding.sysid") == {
        "r2s2r_envs",
        "r2s2r_envs.behavior",
        "r2s2r_envs.datasets.reader",
        "r2s2r_envs.envs.hand",
        "r2s2r_envs.world.params",
    }
