"""Where every benchmark leaves its figures: printed, and in bench/results/<name>-<run>.json."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"


def save_results(name: str, run: str, results: Mapping[str, Any]) -> Path:
    text = json.dumps(results, indent=2)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{name}-{run}.json"
    out.write_text(text + "\n")
    print(f"written to {out}")
    return out
