"""The optional dependencies: which extra brings which module, and the error met without it.

The core install makes, runs, records and evaluates the envs. Plots and pages (``plots``: matplotlib, plotly) and
the behavior metrics and mixture analysis (``analysis``: scikit-learn, dtaidistance) are extras, like torch, ray
and the others (pyproject.toml lists them; ``make setup`` installs every one). Code that needs one calls
:func:`require` before importing it, so a user without the extra reads which one to install; ``r2s2r`` turns any
other missing module of an extra into the same one-line message (:func:`install_hint`).
"""

from __future__ import annotations

import importlib.util

#: The top-level module -> the extra of ``r2s2r_envs`` that brings it.
EXTRA_OF_MODULE: dict[str, str] = {
    "matplotlib": "plots",
    "plotly": "plots",
    "sklearn": "analysis",
    "dtaidistance": "analysis",
    "torch": "torch",
    "stable_baselines3": "rl",
    "ray": "ray",
    "jupytext": "course",
    "nbclient": "course",
    "nbformat": "course",
    "pyarrow": "interop",
    "minari": "interop",
}


class MissingExtraError(ModuleNotFoundError):
    """A module of an extra is not installed; the message names the extra and the command that installs it."""


def install_hint(extra: str) -> str:
    """How to install an extra: ``install the plots extra: pip install 'r2s2r_envs[plots]'``."""
    return f"install the {extra} extra: pip install 'r2s2r_envs[{extra}]'"


def extra_of(module: str | None) -> str | None:
    """The extra that brings a module (``plotly.graph_objects`` -> ``plots``), or None."""
    return EXTRA_OF_MODULE.get((module or "").partition(".")[0])


def require(*modules: str, what: str) -> None:
    """Checks that the top-level ``modules`` (keys of :data:`EXTRA_OF_MODULE`) can be imported, without importing them.

    Args:
        modules: the modules ``what`` imports.
        what: what needs them, for the message (``"the leaderboard page"``).

    Raises:
        MissingExtraError: one is not installed (the message names it, the extra and the install command).
    """
    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise MissingExtraError(f"{what} needs {module}; {install_hint(EXTRA_OF_MODULE[module])}", name=module)
