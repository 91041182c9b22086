import os
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "review-sentiment")
sys.path.insert(0, ROOT)


@pytest.fixture
def write_config(tmp_path):
    """Write a config (YAML text) into a fresh project dir with one small data file."""

    def write(text: str, name: str = "config.yaml", items=None) -> str:
        data = tmp_path / "items.jsonl"
        if not data.exists():
            rows = items or [{"id": f"i{n}", "text": f"item number {n}"} for n in range(5)]
            import json

            data.write_text("".join(json.dumps(r) + "\n" for r in rows))
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return str(path)

    return write


BASE = """\
annotation_task_name: Test
data_files: [items.jsonl]
admin_api_key: test-admin-key-0123456789
annotation_schemes:
  - annotation_type: radio
    name: sentiment
    labels: [positive, negative]
"""
