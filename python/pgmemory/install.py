"""Installing the extension's files into a PostgreSQL server (`pgmemory install-extension`).

The files come from the package (a wheel carries `extension/memory.control`,
`state/`, `sql/`, `upgrades/` and `released/` as `pgmemory/extension/...`) or,
in a source checkout or editable install, from the repository's `extension/`
folder. The scripts are assembled here exactly as `extension/Makefile`
assembles them (the same header, the parts in the same order, byte for byte):
`memory--<version>.sql` from state/*.sql and sql/*.sql, and each upgrade
script `memory--<from>--<to>.sql` from upgrades/<from>--<to>.sql and sql/*.sql.
`make install` and `pgmemory install-extension` install the same files:
those, `memory.control` and the frozen scripts of released versions
(`released/memory--<version>.sql`), into `$(pg_config --sharedir)/extension`.

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
        if (candidate / CONTROL).is_file() and (candidate / "state").is_dir():
            return candidate
    raise InstallError(
        f"the extension's files are missing: no {CONTROL} and state/ in {here / 'extension'}"
        f" or {here.parents[1] / 'extension'}"
    )


def control_version(control: str) -> str:
    """`default_version` of a control file, as extension/Makefile reads it."""
    found = re.search(r"^default_version = '(.*)'", control, re.MULTILINE)
    if found is None:
        raise InstallError(f"{CONTROL} has no default_version")
    return found.group(1)


def _parts(src: Path, folder: str) -> list[Path]:
    parts = sorted((src / folder).glob("*.sql"))
    if not parts:
        raise InstallError(f"no SQL parts in {src / folder}")
    return parts


def _assemble(src: Path, name: str, guard: str, parts: list[Path]) -> bytes:
    out = [
        f"-- {name}: generated from extension/ (state/, sql/, upgrades/);"
        " edit the parts, not this file\n".encode(),
        f'\\echo Use "{guard}" to load this file. \\quit\n'.encode(),
    ]
    for path in parts:
        out.append(f"\n-- ---- {path.relative_to(src).as_posix()}\n".encode())
        out.append(path.read_bytes())
    return b"".join(out)


def build_script(src: Path, version: str) -> bytes:
    """`memory--<version>.sql`: state/*.sql then sql/*.sql, with the Makefile's header."""
    name = f"{EXTENSION}--{version}.sql"
    parts = _parts(src, "state") + _parts(src, "sql")
    return _assemble(src, name, f"CREATE EXTENSION {EXTENSION}", parts)


def upgrade_scripts(src: Path) -> dict[str, bytes]:
    """`memory--A--B.sql` for every upgrades/A--B.sql: the step, then every code part."""
    code = _parts(src, "sql")
    return {
        f"{EXTENSION}--{step.name}": _assemble(
            src, f"{EXTENSION}--{step.name}", f"ALTER EXTENSION {EXTENSION} UPDATE", [step, *code]
        )
        for step in sorted((src / "upgrades").glob("*--*.sql"))
    }


def extension_files(src: Path | None = None) -> tuple[str, dict[str, bytes]]:
    """(version, {file name: content}) of everything `make install` installs."""
    src = src or source_dir()
    control = (src / CONTROL).read_bytes()
    version = control_version(control.decode())
    files = {CONTROL: control, f"{EXTENSION}--{version}.sql": build_script(src, version)}
    files.update(upgrade_scripts(src))
    for path in sorted((src / "released").glob(f"{EXTENSION}--*.sql")):
        files.setdefault(path.name, path.read_bytes())  # frozen releases
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
