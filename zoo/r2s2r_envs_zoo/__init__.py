"""The model zoo's checkpoints for r2s2r_envs, as data: one folder per entry, with ``config.json`` and
``policy.pt``. Load them through the core package (``r2s2r_envs.policies.load_policy("zoo:NAME")``), whose zoo
index pins each file's SHA-256; this package has no code of its own but :data:`ROOT`.
"""

from pathlib import Path

__version__ = "2.0.0"

#: The folder that holds one checkpoint folder per zoo entry.
ROOT = Path(__file__).resolve().parent
