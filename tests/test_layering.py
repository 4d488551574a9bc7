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
# package's cli.py or *_cli.py; they may import anything, and only commands import them.
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


def package_imports(source: str, module: str, is_package: bool = False) -> set[str]:
    """The modules of the package that ``source`` (the text of ``module``) imports, anywhere in it (functions too).

    ``from pkg import name`` counts as importing ``pkg.name`` when that is a module, else ``pkg``; a bare
    ``import r2s2r_envs`` (or ``from r2s2r_envs import <attribute>``) imports the root package, a command.
    """
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if _is_module(f"{base}.{alias.name}") else base)
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ("import_module", "__import__") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.add(arg.value)
    return {m for m in found if m == "r2s2r_envs" or m.startswith("r2s2r_envs.")}


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


@pytest.mark.parametrize(
    ("importer", "imported"),
    [
        ("r2s2r_envs.behavior.segments", "r2s2r_envs.datasets"),  # allowed: datasets sits below behavior
        ("r2s2r_envs.evaluation.cli", "r2s2r_envs.policies"),  # a command may import anything
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
