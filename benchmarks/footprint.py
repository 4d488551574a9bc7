"""What a clone and an install weigh: the tracked tree, a shallow clone's ``.git``, the wheels and the core
install's dependency count, for one or more commits (issue 49's goals: tree <= 25 MB, shallow ``.git`` <= 12 MB,
core wheel <= 2 MB without the zoo's data package, the core's dependency count down).

For each commit:

* ``tree_bytes``: the sum of the sizes of the files tracked at that commit (``git ls-tree -r -l``), with the biggest
  parts (per-step training logs, the model zoo's weights, each top-level folder);
* ``shallow_git_bytes``: the ``.git`` folder of a depth-1 fetch of that commit into an empty repository, checked out
  (what ``git clone --depth 1`` leaves, less the hook samples);
* ``wheels``: the size of each wheel built from that commit's files (``pip wheel --no-deps --no-build-isolation``,
  offline): the core package and, where the commit has one, the zoo's data package ``zoo/``;
* ``core_dependencies``: the distributions a core install brings (``[project].dependencies`` with no extra,
  followed through each installed distribution's requirements with their markers), counted on this interpreter's
  installed packages (no network; the full set-up, ``make setup``, has them all); and the count if the core
  required ``mujoco`` without its ``sysid`` extra.

The sizes are bytes (MB below means 10^6 bytes).  Example::

    python benchmarks/footprint.py --rev e38963b1e73718f1e4c01e4cf15018554d0e892d --rev HEAD \\
        --out benchmarks/results/house/footprint.json
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from collections import Counter
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
#: The goals of issue 49, in bytes (and a count).
GOALS = {"tree_bytes": 25_000_000, "shallow_git_bytes": 12_000_000, "core_wheel_bytes": 2_000_000}
#: The folders a commit may hold the zoo's data package in.
ZOO_PACKAGE_DIRS = ("zoo",)


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def tree(rev: str) -> dict[str, Any]:
    """Bytes tracked at ``rev``: in all, per top-level folder, in training logs and in the zoo's weights."""
    total, files = 0, 0
    parts: Counter[str] = Counter()
    for line in git("ls-tree", "-r", "-l", rev).splitlines():
        meta, path = line.split("\t", 1)
        size = meta.split()[3]
        if size == "-":  # a submodule
            continue
        total, files = total + int(size), files + 1
        parts[path.split("/", 1)[0] if "/" in path else "(top level files)"] += int(size)
        if path.endswith(("train_log.json", "train_log.json.gz")):
            parts["(training logs)"] += int(size)
        if path.endswith("policy.pt") and "zoo" in path:
            parts["(zoo weights)"] += int(size)
    return {"tree_bytes": total, "tracked_files": files, "tree_parts_bytes": dict(parts.most_common())}


def shallow_git(rev: str) -> int:
    """Bytes of ``.git`` after a depth-1 fetch of ``rev`` into an empty repository, checked out."""
    sha = git("rev-parse", f"{rev}^{{commit}}").strip()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        git("init", "-q", "--template=", str(repo), cwd=repo)
        git("fetch", "-q", "--depth", "1", f"file://{ROOT}", sha, cwd=repo)
        git("checkout", "-q", sha, cwd=repo)
        return sum(p.stat().st_size for p in (repo / ".git").rglob("*") if p.is_file())


def wheels(rev: str) -> dict[str, int]:
    """``{wheel file name: bytes}`` of the wheels built from ``rev``'s files (the core, and the zoo's data)."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp) / "src", Path(tmp) / "wheels"
        src.mkdir()
        archive = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(src, filter="data")
        projects = [src, *(src / d for d in ZOO_PACKAGE_DIRS if (src / d / "pyproject.toml").is_file())]
        for project in projects:
            subprocess.run(
                [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
                + ["--wheel-dir", str(out), str(project)],
                check=True,
                capture_output=True,
            )
        return {p.name: p.stat().st_size for p in sorted(out.glob("*.whl"))}


def dependency_closure(requirements: list[str]) -> list[str]:
    """The distributions that ``requirements`` bring, followed through the installed distributions' metadata."""
    seen: set[tuple[str, tuple[str, ...]]] = set()
    names: set[str] = set()
    missing: set[str] = set()
    stack = [Requirement(r) for r in requirements]
    while stack:
        req = stack.pop()
        key = (canonicalize_name(req.name), tuple(sorted(req.extras)))
        if key in seen:
            continue
        seen.add(key)
        names.add(key[0])
        try:
            dist = distribution(req.name)
        except PackageNotFoundError:
            missing.add(key[0])
            continue
        environments = [{"extra": e} for e in (sorted(req.extras) or [""])]
        for line in dist.requires or []:
            sub = Requirement(line)
            if sub.marker is None or any(sub.marker.evaluate(env) for env in environments):
                stack.append(sub)
    if missing:
        raise SystemExit(f"not installed here, so not followed: {sorted(missing)} (run `make setup` first)")
    return sorted(names)


def core_dependencies(rev: str) -> dict[str, Any]:
    project = tomllib.loads(git("show", f"{rev}:pyproject.toml"))["project"]
    closure = dependency_closure(list(project["dependencies"]))
    # What-if: mujoco without its sysid extra in the core (identification an extra of its own).
    bare = [str(Requirement(r)).replace("mujoco[sysid]", "mujoco") for r in project["dependencies"]]
    return {
        "requires_python": project.get("requires-python"),
        "direct": list(project["dependencies"]),
        "extras": sorted(project.get("optional-dependencies", {})),
        "core_dependency_count": len(closure),
        "core_dependencies": closure,
        "core_dependency_count_if_mujoco_without_sysid": len(dependency_closure(bare)),
    }


def measure(rev: str) -> dict[str, Any]:
    sha = git("rev-parse", f"{rev}^{{commit}}").strip()
    record: dict[str, Any] = {"rev": sha, "subject": git("log", "-1", "--format=%s", sha).strip()}
    record.update(tree(sha))
    record["shallow_git_bytes"] = shallow_git(sha)
    record["wheels_bytes"] = wheels(sha)
    record["core_wheel_bytes"] = next(v for k, v in record["wheels_bytes"].items() if k.startswith("r2s2r_envs-"))
    record.update(core_dependencies(sha))
    record["goals_met"] = {key: record[key] <= limit for key, limit in GOALS.items()}
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", action="append", help="a commit to measure (repeatable; default HEAD)")
    parser.add_argument("--out", type=Path, help="write the JSON record here")
    args = parser.parse_args(argv)
    records = [measure(rev) for rev in args.rev or ["HEAD"]]
    for r in records:
        print(
            f"{r['rev'][:10]}  tree {r['tree_bytes'] / 1e6:.1f} MB ({r['tracked_files']} files)  "
            f"shallow .git {r['shallow_git_bytes'] / 1e6:.1f} MB  core wheel {r['core_wheel_bytes'] / 1e6:.2f} MB  "
            f"core dependencies {r['core_dependency_count']}  requires-python {r['requires_python']}"
        )
        print("    goals met:", ", ".join(f"{k} {'yes' if v else 'no'}" for k, v in r["goals_met"].items()))
        for name, size in r["wheels_bytes"].items():
            print(f"    {name}: {size / 1e6:.2f} MB")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        document = {"goals": GOALS, "python": sys.version.split()[0], "measurements": records}
        args.out.write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
