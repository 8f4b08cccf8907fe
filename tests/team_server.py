"""A team's MLflow server for tests: PostgreSQL as the backend store and a shared artifact root, both
on loopback, started from Debian's packages and the venv's mlflow, stopped afterwards."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path


def postgres_bin() -> Path | None:
    """Debian's PostgreSQL binaries (package postgresql), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_postgres(command: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the package's own user."""
    return ["runuser", "-u", "postgres", "--", *command] if os.getuid() == 0 else command


class TeamServer:
    """`with TeamServer(folder) as server:` gives `server.tracking_uri`, an http:// MLflow server."""

    def __init__(self, folder: Path):
        self.folder, self.bin = folder, postgres_bin()
        self.data, self.artifacts = folder / "pgdata", folder / "artifacts"
        self.pg_port, self.port = _free_port(), _free_port()
        self.mlflow: subprocess.Popen | None = None

    @property
    def tracking_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self, command: list[str]) -> None:
        done = subprocess.run(_as_postgres(command), capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{command[0]} failed: {done.stderr[-2000:]}")

    def __enter__(self) -> TeamServer:
        self.data.mkdir(parents=True)
        self.artifacts.mkdir()
        if os.getuid() == 0:
            shutil.chown(self.data, "postgres")
            for folder in [self.folder, *self.folder.parents]:
                folder.chmod(folder.stat().st_mode | 0o001)  # postgres passes through to its data
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust"])
        options = f"-p {self.pg_port} -k {self.data} -c listen_addresses=127.0.0.1"
        # -l: the server's output goes to its log, not to the pipe this process reads pg_ctl's from.
        log = self.data / "server.log"
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(log), "-o", options, "-w", "start"])
        self._run([str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.pg_port), "-U", "postgres", "mlflow"])
        # SQLAlchemy's plain postgresql:// means psycopg 3 here; the driver installed is psycopg2.
        backend = f"postgresql+psycopg2://postgres@127.0.0.1:{self.pg_port}/mlflow"
        self.mlflow = subprocess.Popen(
            [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", backend,
             "--artifacts-destination", str(self.artifacts), "--host", "127.0.0.1", "--port", str(self.port),
             "--workers", "2"],
            stdout=subprocess.DEVNULL, stderr=open(self.folder / "mlflow-server.log", "w"),
            # As docs/scale-out.md runs it: no MLflow job consumer (ten workers) beside the server.
            env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and self.mlflow.poll() is None:
            try:
                with urllib.request.urlopen(f"{self.tracking_uri}/health", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        self.__exit__()
        raise RuntimeError(f"mlflow server did not start: {(self.folder / 'mlflow-server.log').read_text()[-2000:]}")

    def __exit__(self, *exc) -> None:
        if self.mlflow is not None:
            self.mlflow.terminate()
            self.mlflow.wait(timeout=30)
        subprocess.run(
            _as_postgres([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "stop"]),
            capture_output=True, timeout=60,
        )  # fmt: skip
