"""The files a variant ships, as the `kernels` loader walks them: every regular
file under the variant directory except bytecode (anything under a `__pycache__`
directory, `*.pyc` files); its digest covers them all but the top-level
`metadata.json` and `metadata.json.sigstore`. A symbolic link to a file counts as
that file; links to directories are not followed. kernelnix.publish.digest hashes
them; the provenance rule checks the digests its statement records.
"""

from __future__ import annotations

import os
from pathlib import Path

from kernelnix.core.diagnostics import UserError, display_path

METADATA = "metadata.json"
UNHASHED = frozenset({METADATA, "metadata.json.sigstore"})  # top level only
BYTECODE_DIR = "__pycache__"


def shipped_files(variant_dir: Path) -> list[str]:
    """Every file of a variant except bytecode, sorted `/`-separated relative paths."""
    files: list[str] = []
    for root, dirs, names in os.walk(variant_dir):
        dirs[:] = [d for d in dirs if d != BYTECODE_DIR]
        base = Path(root).relative_to(variant_dir)
        for name in names:
            file = Path(root, name)
            if name.endswith(".pyc"):
                continue
            if file.is_file():  # a link to a file counts, as upstream
                files.append((base / name).as_posix())
            elif not file.exists():
                raise UserError.single(
                    "broken symbolic link: the loader cannot hash this variant",
                    file=display_path(file),
                    fix="remove the link or make it point to a file inside the variant",
                )
    return sorted(files)


def hashed_files(variant_dir: Path) -> list[str]:
    """The files a digest covers: those shipped, less the metadata and its signature."""
    return [f for f in shipped_files(variant_dir) if f not in UNHASHED]
