"""An S3-compatible server on loopback (moto's server mode) for tests that use Metaflow's S3 datastore."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from otlp_receiver import free_port

BUCKET = "traincard-test"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextmanager
def s3_server() -> Iterator[str]:
    """Start moto's S3 server in a child process (so a test can stop it) and yield its endpoint URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url, timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        import boto3

        boto3.client("s3", endpoint_url=url, **_boto_kwargs()).create_bucket(Bucket=BUCKET)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def _boto_kwargs() -> dict[str, str]:
    return {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}


def metaflow_s3_env(endpoint: str, root: str = "metaflow") -> dict[str, str]:
    return {
        **CREDENTIALS,
        "METAFLOW_DEFAULT_DATASTORE": "s3",
        "METAFLOW_DATASTORE_SYSROOT_S3": f"s3://{BUCKET}/{root}",
        "METAFLOW_S3_ENDPOINT_URL": endpoint,
        "METAFLOW_DEFAULT_METADATA": "local",
    }
