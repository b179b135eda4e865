"""`report.html`: one self-contained page (placeholder until the full renderer lands)."""
from __future__ import annotations

import html as _html
import json
from pathlib import Path


def write_html(path: Path, report: dict) -> None:
    body = _html.escape(json.dumps(report["summary"]["pipelines"], indent=1, sort_keys=True))
    path.write_text(f"<!doctype html><meta charset=utf-8><title>ragaudit</title><pre>{body}</pre>", encoding="utf-8")
