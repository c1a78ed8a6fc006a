"""GCS and Azure Blob emulators on loopback, for tests that use Metaflow's GCS and Azure datastores.

gcp-storage-emulator comes from PyPI (the ``dev`` extra), Azurite from npm (``make system-packages``
installs it under ``node_modules/`` of the repository). Metaflow reaches them through its own
datastore code and client factories; the credentials come from the client providers in
``tests/support/mfext`` (Metaflow's extension mechanism), since the default chains need cloud accounts.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.helpers import REPO
from tests.support.otlp_receiver import free_port

EXTENSIONS = str(Path(__file__).resolve().parent / "mfext")
BUCKET = "traincard-test"
AZURITE_ACCOUNT = "devstoreaccount1"  # Azurite's published development account
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start (exit code {proc.poll()})") from None
            time.sleep(0.2)


@contextmanager
def gcs_emulator() -> Iterator[dict[str, str]]:
    """gcp-storage-emulator with bucket ``BUCKET``; yields the environment for Metaflow to use it."""
    exe = shutil.which("gcp-storage-emulator") or str(Path(sys.executable).parent / "gcp-storage-emulator")
    if not Path(exe).exists():
        pytest.skip("gcp-storage-emulator is not installed (pip install -e '.[dev]')")
    pytest.importorskip("google.cloud.storage")
    port = free_port()
    proc = subprocess.Popen(
        [exe, "start", "--host", "127.0.0.1", "--port", str(port), "--in-memory", "--default-bucket", BUCKET],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_port(port, proc, "gcp-storage-emulator")
        yield {
            "STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}",
            "METAFLOW_DEFAULT_GCP_CLIENT_PROVIDER": "emulator",
            "PYTHONPATH": EXTENSIONS,
        }
    finally:
        proc.terminate()
        proc.wait(10)


def azurite_executable() -> str | None:
    exe = REPO / "node_modules" / ".bin" / "azurite-blob"
    return str(exe) if exe.exists() else shutil.which("azurite-blob")


@contextmanager
def azurite(workdir: Path) -> Iterator[dict[str, str]]:
    """Azurite's blob service over HTTPS with OAuth, container ``BUCKET``; yields the environment for
    Metaflow to use it (its Azure datastore authenticates with bearer tokens, which the Azure SDK
    sends over HTTPS only: a self-signed certificate, trusted through ``REQUESTS_CA_BUNDLE``)."""
    exe = azurite_executable()
    if exe is None:
        pytest.skip("Azurite is not installed (make system-packages installs it from npm)")
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make Azurite's certificate")
    pytest.importorskip("azure.storage.blob")
    pytest.importorskip("azure.identity")
    cert, key = workdir / "azurite-cert.pem", workdir / "azurite-key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    port = free_port()
    proc = subprocess.Popen(
        [
            exe,
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--inMemoryPersistence",
            "--silent",
            "--skipApiVersionCheck",
            "--disableTelemetry",
            "--oauth",
            "basic",
            "--cert",
            str(cert),
            "--key",
            str(key),
        ],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_port(port, proc, "Azurite")
        endpoint = f"https://127.0.0.1:{port}/{AZURITE_ACCOUNT}"
        from azure.storage.blob import BlobServiceClient

        BlobServiceClient(
            endpoint,
            credential={"account_name": AZURITE_ACCOUNT, "account_key": AZURITE_KEY},
            connection_verify=str(cert),
        ).create_container(BUCKET)
        yield {
            "METAFLOW_AZURE_STORAGE_BLOB_SERVICE_ENDPOINT": endpoint,
            "METAFLOW_DEFAULT_AZURE_CLIENT_PROVIDER": "azurite",
            "REQUESTS_CA_BUNDLE": str(cert),
            "PYTHONPATH": EXTENSIONS,
        }
    finally:
        proc.terminate()
        proc.wait(10)
