"""One bounded attempt of a datastore call (a write or a delete), through Metaflow's clients.

The store writer's backoff (:mod:`traincard_otel._write.store.retry`) is the retry loop.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import Callable

from .._types import Foreign

# One attempt of a datastore write, bounded: the writer's backoff is the retry loop.
# Metaflow's own write paths retry far longer (S3: up to 20 tries with backoff to 6 minutes; GCS:
# google's DEFAULT_RETRY for up to 120 s; Azure: the SDK's 10 retries), which would stall the
# writer for minutes while counting nothing, so writes use Metaflow's clients directly.
CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 10.0


def bounded_put(ds_type: str, ds_root: str, storage: Foreign) -> Callable[[str, bytes], None]:
    """A ``put(key, data)`` for ``key`` under ``ds_root`` that tries once, with short timeouts."""
    if ds_type == "s3":
        from urllib.parse import urlparse

        url = urlparse(ds_root)
        bucket, base = url.netloc, url.path.strip("/")
        client = storage.s3_client  # Metaflow's S3Client: its credentials, role and endpoint
        from metaflow.metaflow_config import S3_SERVER_SIDE_ENCRYPTION

        extra = {"ServerSideEncryption": S3_SERVER_SIDE_ENCRYPTION} if S3_SERVER_SIDE_ENCRYPTION else {}

        def put_s3(key: str, data: bytes) -> None:
            client.client.put_object(Bucket=bucket, Key=f"{base}/{key}" if base else key, Body=data, **extra)

        return put_s3
    if ds_type == "gs":
        from metaflow.plugins.gcp.gs_storage_client_factory import get_gs_storage_client
        from metaflow.plugins.gcp.gs_utils import parse_gs_full_path

        gs_bucket, gs_base = parse_gs_full_path(ds_root)

        def put_gs(key: str, data: bytes) -> None:
            # Metaflow's client is cached per thread: the writer's thread and close()'s final flush
            # each get their own, as Metaflow's datastore does.
            blob = get_gs_storage_client().bucket(gs_bucket).blob(f"{gs_base}/{key}" if gs_base else key)
            blob.upload_from_string(data, retry=None, timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S))

        return put_gs
    if ds_type == "azure":
        from metaflow.plugins.azure.azure_utils import parse_azure_full_path
        from metaflow.plugins.azure.blob_service_client_factory import get_azure_blob_service_client

        container, az_base = parse_azure_full_path(ds_root)

        def put_azure(key: str, data: bytes) -> None:
            service = get_azure_blob_service_client()
            blob = service.get_blob_client(container, f"{az_base}/{key}" if az_base else key)
            blob.upload_blob(
                data,
                overwrite=True,
                retry_total=0,
                connection_timeout=CONNECT_TIMEOUT_S,
                read_timeout=READ_TIMEOUT_S,
            )

        return put_azure

    def put_other(key: str, data: bytes) -> None:  # Metaflow's local datastore: plain files
        storage.save_bytes([(key, io.BytesIO(data))], overwrite=True)

    return put_other


def quick_s3_client() -> Foreign:
    """Metaflow's S3 client with a bounded botocore policy: one attempt, connect within
    ``CONNECT_TIMEOUT_S``, each read within ``READ_TIMEOUT_S``. A ``config`` the user set in
    ``METAFLOW_DATATOOLS_CLIENT_PARAMS`` wins key by key."""
    from metaflow.metaflow_config import DATATOOLS_CLIENT_PARAMS
    from metaflow.plugins.datatools.s3.s3 import S3Client

    params = dict(DATATOOLS_CLIENT_PARAMS or {})  # endpoint URL and the like from Metaflow's config
    config = params.get("config") or {}
    if not isinstance(config, dict):
        return S3Client()  # the user configured a botocore Config object: keep theirs
    params["config"] = {
        "connect_timeout": CONNECT_TIMEOUT_S,
        "read_timeout": READ_TIMEOUT_S,
        "retries": {
            "total_max_attempts": 1,
            "mode": "standard",
        },  # botocore's max_attempts excludes the first
        **config,
    }
    return S3Client(s3_client_params=params)


def bounded_delete(ds_type: str, ds_root: str, storage: Foreign) -> Callable[[list[str]], None]:
    """A ``delete(keys)`` for keys under ``ds_root`` with the writes' short timeouts."""
    if ds_type == "s3":
        from urllib.parse import urlparse

        url = urlparse(ds_root)
        bucket, base = url.netloc, url.path.strip("/")
        client = storage.s3_client.client

        def delete_s3(keys: list[str]) -> None:
            for lo in range(0, len(keys), 1000):
                objects = [{"Key": f"{base}/{k}" if base else k} for k in keys[lo : lo + 1000]]
                client.delete_objects(Bucket=bucket, Delete={"Objects": objects, "Quiet": True})

        return delete_s3
    if ds_type == "gs":
        from google.api_core.exceptions import NotFound
        from metaflow.plugins.gcp.gs_storage_client_factory import get_gs_storage_client
        from metaflow.plugins.gcp.gs_utils import parse_gs_full_path

        gs_bucket, gs_base = parse_gs_full_path(ds_root)

        def delete_gs(keys: list[str]) -> None:
            bucket = get_gs_storage_client().bucket(gs_bucket)
            for key in keys:
                with contextlib.suppress(NotFound):
                    bucket.blob(f"{gs_base}/{key}" if gs_base else key).delete(
                        retry=None, timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S)
                    )

        return delete_gs
    if ds_type == "azure":
        from azure.core.exceptions import ResourceNotFoundError
        from metaflow.plugins.azure.azure_utils import parse_azure_full_path
        from metaflow.plugins.azure.blob_service_client_factory import get_azure_blob_service_client

        container, az_base = parse_azure_full_path(ds_root)

        def delete_azure(keys: list[str]) -> None:
            service = get_azure_blob_service_client()
            for key in keys:
                blob = service.get_blob_client(container, f"{az_base}/{key}" if az_base else key)
                with contextlib.suppress(ResourceNotFoundError):
                    blob.delete_blob(
                        retry_total=0, connection_timeout=CONNECT_TIMEOUT_S, read_timeout=READ_TIMEOUT_S
                    )

        return delete_azure

    def delete_other(keys: list[str]) -> None:  # Metaflow's local datastore: plain files
        for key in keys:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(storage.full_uri(key))

    return delete_other
