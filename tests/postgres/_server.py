"""A throwaway PostgreSQL server: ``initdb`` + ``pg_ctl`` in a temporary directory.

Used by the PostgreSQL tests (a session fixture) and the scale benchmarks. The
server listens on 127.0.0.1 on a free port, trusts local connections, and runs
without fsync (it is thrown away). ``initdb`` refuses to run as root, so as root
the cluster belongs to an unprivileged user (``nobody``) and every command runs
as that user through ``runuser`` (or ``setpriv``).

The binaries are found in ``$CONTEXT_GUARD_PG_BIN``, ``/usr/lib/postgresql/*/bin``
(newest first), ``pg_config --bindir`` or ``PATH``; ``bash .ci/postgres.sh``
installs them when missing.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_TOOLS = ("initdb", "pg_ctl", "postgres")
MISSING = (
    "PostgreSQL server binaries (initdb, pg_ctl) not found. Run `bash .ci/postgres.sh` "
    "(installs Debian's postgresql package) or set CONTEXT_GUARD_PG_BIN to their "
    "directory."
)


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries, or the server would not start."""


def _version_key(path: str) -> tuple[int, ...]:
    digits = Path(path).parent.name
    return tuple(int(p) for p in digits.split(".") if p.isdigit()) or (0,)


def find_bindir() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl``; raises when there is none."""
    candidates: list[str] = []
    if os.environ.get("CONTEXT_GUARD_PG_BIN"):
        candidates.append(os.environ["CONTEXT_GUARD_PG_BIN"])
    candidates += sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True
    )
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, check=False
        )
        candidates.append(out.stdout.strip())
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(str(Path(initdb).parent))
    for directory in candidates:
        if directory and all((Path(directory) / t).is_file() for t in _TOOLS):
            return Path(directory)
    raise PostgresUnavailable(MISSING)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_user(user: str | None) -> list[str]:
    """The command prefix that runs a command as ``user`` (none when not root)."""
    if user is None:
        return []
    if shutil.which("runuser"):
        return ["runuser", "-u", user, "--"]
    if shutil.which("setpriv"):
        entry = pwd.getpwnam(user)
        return [
            "setpriv",
            f"--reuid={entry.pw_uid}",
            f"--regid={entry.pw_gid}",
            "--clear-groups",
        ]
    raise PostgresUnavailable(
        "Running as root and neither runuser nor setpriv is available to run "
        "initdb as an unprivileged user; run the tests as a normal user."
    )


def _server_user() -> str | None:
    """None when not root; else an unprivileged user that exists."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise PostgresUnavailable("Running as root and no 'postgres' or 'nobody' user.")


@dataclass
class PostgresServer:
    """A running throwaway server; ``dsn`` connects as the ``postgres`` superuser."""

    root: Path
    port: int
    bindir: Path
    prefix: list[str]

    @property
    def dsn(self) -> str:
        """A libpq connection string to the ``postgres`` database."""
        return self.url("postgres")

    def url(self, database: str) -> str:
        """A connection URL to ``database`` on this server."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """Create database ``name`` and return its URL."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        """Stop the server and delete its directory."""
        subprocess.run(
            [
                *self.prefix,
                str(self.bindir / "pg_ctl"),
                "stop",
                "-D",
                str(self.root / "data"),
                "-m",
                "immediate",
                "-w",
            ],
            capture_output=True,
            check=False,
        )
        shutil.rmtree(self.root, ignore_errors=True)


def start_server() -> PostgresServer:
    """initdb a cluster in a temporary directory and start it on a free port."""
    bindir = find_bindir()
    user = _server_user()
    prefix = _as_user(user)
    root = Path(tempfile.mkdtemp(prefix="cg-pg-"))
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(root, entry.pw_uid, entry.pw_gid)
    os.chmod(root, 0o755)

    def run(*args: str) -> None:
        done = subprocess.run(
            [*prefix, *args], capture_output=True, text=True, check=False, cwd=root
        )
        if done.returncode != 0:
            raise PostgresUnavailable(
                f"{Path(args[0]).name} failed ({done.returncode}): "
                f"{done.stderr.strip() or done.stdout.strip()}"
            )

    try:
        return _start(root, bindir, prefix, run)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def _start(
    root: Path, bindir: Path, prefix: list[str], run: Callable[..., None]
) -> PostgresServer:
    data = root / "data"
    run(
        str(bindir / "initdb"),
        "-D",
        str(data),
        "-U",
        "postgres",
        "--auth=trust",
        "-E",
        "UTF8",
        "--no-sync",
        "--locale=C",
    )
    for attempt in range(3):
        port = _free_port()
        options = (
            f"-h 127.0.0.1 -p {port} -k {root} -F "
            "-c max_connections=200 -c shared_buffers=64MB "
            "-c synchronous_commit=off -c full_page_writes=off"
        )
        try:
            run(
                str(bindir / "pg_ctl"),
                "start",
                "-D",
                str(data),
                "-w",
                "-t",
                "60",
                "-l",
                str(root / "log"),
                "-o",
                options,
            )
        except PostgresUnavailable:
            if attempt == 2:
                raise
            continue  # the port was taken meanwhile
        return PostgresServer(root, port, bindir, prefix)
    raise AssertionError("unreachable")  # pragma: no cover
