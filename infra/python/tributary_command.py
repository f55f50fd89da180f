#!/usr/bin/env python3
"""`tributary`: the lakehouse's terminal commands (jobs/cli.py), from any folder.

    tributary query event_counts_1m --from 2026-11-25T10:00Z --to 2026-11-25T12:00Z
    tributary compare --left batch --right speed

`make setup` copies this file into the venv's bin/ as `tributary`. The venv is shared by
every clone on the machine (it lives in the cache), so the command finds its clone at run
time: $TRIBUTARY_HOME if set, else the clone whose .venv it was called through
(`./.venv/bin/tributary`), else the clone around the current folder.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def is_clone(folder: Path) -> bool:
    return (folder / "jobs" / "cli.py").is_file() and (folder / "lakehouse").is_dir()


def find_clone(argv0: str, cwd: Path, home: str | None) -> Path | None:
    if home:
        return Path(home) if is_clone(Path(home)) else None
    # Not resolved: through the .venv symlink, argv[0] is <clone>/.venv/bin/tributary.
    called_as = Path(os.path.abspath(argv0))
    candidates = [called_as.parent.parent.parent, cwd, *cwd.parents]
    return next((c for c in candidates if is_clone(c)), None)


def main() -> int:
    home = os.environ.get("TRIBUTARY_HOME")
    clone = find_clone(sys.argv[0], Path.cwd(), home)
    if clone is None:
        where = f"TRIBUTARY_HOME={home} is not" if home else "this folder is not inside"
        print(
            f"tributary: {where} a Tributary clone; cd into one, or set TRIBUTARY_HOME to it",
            file=sys.stderr,
        )
        return 1
    sys.path.insert(0, str(clone))
    # Spark's Python workers import the project too; they inherit PYTHONPATH, not sys.path.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(clone), os.environ.get("PYTHONPATH", "")) if p
    )
    from jobs.cli import main as cli_main

    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
