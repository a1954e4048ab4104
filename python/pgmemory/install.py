"""Installing the extension's files into a PostgreSQL server (`pgmemory install-extension`).

The files come from the package (a wheel carries `extension/memory.control`
and `extension/sql/*.sql` as `pgmemory/extension/...`) or, in a source checkout
or editable install, from the repository's `extension/` folder. The versioned
script `memory--<version>.sql` is built here exactly as `extension/Makefile`
builds it (the same header, the parts in the same order, byte for byte), so
`make install` and `pgmemory install-extension` install the same files:
`memory.control`, `memory--<version>.sql`, the frozen scripts of released
versions (`released/memory--<version>.sql`) and the upgrade scripts
`memory--<from>--<to>.sql`, into `$(pg_config --sharedir)/extension`.

Standard library only; nothing here talks to a database.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

EXTENSION = "memory"
CONTROL = f"{EXTENSION}.control"
MIN_PGVECTOR = (0, 8)


class InstallError(Exception):
    """The extension's files cannot be found, or the target server cannot be written to."""


def source_dir() -> Path:
    """Where the extension's sources are: inside the installed package, else the checkout's."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "extension", here.parents[1] / "extension"):
        if (candidate / CONTROL).is_file() and (candidate / "sql").is_dir():
            return candidate
    raise InstallError(
        f"the extension's files are missing: no {CONTROL} and sql/ in {here / 'extension'}"
        f" or {here.parents[1] / 'extension'}"
    )


def control_version(control: str) -> str:
    """`default_version` of a control file, as extension/Makefile reads it."""
    found = re.search(r"^default_version = '(.*)'", control, re.MULTILINE)
    if found is None:
        raise InstallError(f"{CONTROL} has no default_version")
    return found.group(1)


def build_script(src: Path, version: str) -> bytes:
    """`memory--<version>.sql`: the ordered concatenation of sql/*.sql with the Makefile's header."""
    parts = sorted(p.name for p in (src / "sql").glob("*.sql"))
    if not parts:
        raise InstallError(f"no SQL parts in {src / 'sql'}")
    out = [
        f"-- {EXTENSION} {version}: generated from extension/sql/*.sql;"
        " edit the parts, not this file\n".encode(),
        f'\\echo Use "CREATE EXTENSION {EXTENSION}" to load this file. \\quit\n'.encode(),
    ]
    for name in parts:
        out.append(f"\n-- ---- sql/{name}\n".encode())
        out.append((src / "sql" / name).read_bytes())
    return b"".join(out)


def extension_files(src: Path | None = None) -> tuple[str, dict[str, bytes]]:
    """(version, {file name: content}) of everything `make install` installs."""
    src = src or source_dir()
    control = (src / CONTROL).read_bytes()
    version = control_version(control.decode())
    files = {CONTROL: control, f"{EXTENSION}--{version}.sql": build_script(src, version)}
    # Frozen scripts of released versions (released/), and upgrade scripts.
    extra = [
        *sorted((src / "released").glob(f"{EXTENSION}--*.sql")),
        *sorted(src.glob(f"{EXTENSION}--*--*.sql")),
    ]
    for path in extra:
        files.setdefault(path.name, path.read_bytes())
    return version, files


def sharedir(pg_config: str | os.PathLike[str]) -> Path:
    """`pg_config --sharedir` of a PostgreSQL installation."""
    try:
        done = subprocess.run(
            [os.fspath(pg_config), "--sharedir"], capture_output=True, text=True, check=False
        )
    except OSError as err:
        raise InstallError(f"cannot run pg_config {pg_config}: {err.strerror or err}") from err
    if done.returncode != 0 or not done.stdout.strip():
        detail = done.stderr.strip() or f"exit status {done.returncode}"
        raise InstallError(f"{pg_config} --sharedir failed: {detail}")
    return Path(done.stdout.strip())


@dataclass(frozen=True)
class Installed:
    version: str
    directory: Path
    files: list[str]
    warning: str | None  # about pgvector, when it is missing or too old there


def _write(target: Path, content: bytes) -> None:
    # Written beside the target and renamed over it: a reader never sees half a file.
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.chmod(tmp, 0o644)  # as PGXS installs DATA files
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def pgvector_warning(directory: Path) -> str | None:
    """A warning when pgvector ≥ 0.8 is not installed in the extension directory."""
    control = directory / "vector.control"
    if not control.is_file():
        return f"pgvector is not installed in {directory}; CREATE EXTENSION memory needs pgvector >= 0.8"
    found = re.search(r"^default_version = '(\d+)\.(\d+)", control.read_text(), re.MULTILINE)
    if found is not None and (int(found.group(1)), int(found.group(2))) < MIN_PGVECTOR:
        return (
            f"pgvector {found.group(1)}.{found.group(2)} is installed in {directory};"
            " memory needs pgvector >= 0.8"
        )
    return None


def install(pg_config: str | os.PathLike[str]) -> Installed:
    """Install the extension's files into the PostgreSQL that `pg_config` describes."""
    version, files = extension_files()
    directory = sharedir(pg_config) / "extension"
    if not directory.parent.is_dir():
        raise InstallError(
            f"{directory.parent} does not exist (is {pg_config} a server's pg_config?)"
        )
    try:
        directory.mkdir(exist_ok=True)
        for name, content in files.items():
            _write(directory / name, content)
    except OSError as err:
        raise InstallError(f"cannot write into {directory}: {err.strerror or err}") from err
    return Installed(version, directory, list(files), pgvector_warning(directory))
