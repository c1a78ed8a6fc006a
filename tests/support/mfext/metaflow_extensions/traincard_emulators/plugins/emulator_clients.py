"""The client providers named in ``mfextinit_traincard_emulators``."""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from typing import Any

_gcs_clients: dict[tuple[int, int], Any] = {}


class GcsEmulatorClientProvider:
    """google-cloud-storage clients for the emulator at ``STORAGE_EMULATOR_HOST``, one per thread as
    Metaflow's default provider keeps them."""

    name = "emulator"

    @staticmethod
    def get_gs_storage_client(*_args: Any, **_kwargs: Any) -> Any:
        from google.cloud import storage

        key = (os.getpid(), threading.get_ident())
        if key not in _gcs_clients:
            _gcs_clients[key] = storage.Client(credentials=_anonymous(), project="traincard-test")
        return _gcs_clients[key]

    @staticmethod
    def get_credentials(*_args: Any, **_kwargs: Any) -> Any:
        return _anonymous(), "traincard-test"


def _anonymous() -> Any:
    from google.auth.credentials import AnonymousCredentials

    return AnonymousCredentials()  # type: ignore[no-untyped-call]


class _AzuriteToken:
    """An Azure AD token as Azurite's ``--oauth basic`` mode accepts it: issuer, audience and expiry
    are checked there, the signature is not (there is no tenant to sign it)."""

    def get_token(self, *_scopes: str, **_kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        now = int(time.time())
        claims = {
            "aud": "https://storage.azure.com",
            "iss": "https://sts.windows.net/ab1f708d-50f6-404c-a006-d71b2ac7a606/",
            "tid": "ab1f708d-50f6-404c-a006-d71b2ac7a606",
            "oid": "00000000-0000-0000-0000-000000000001",
            "iat": now - 60,
            "nbf": now - 60,
            "exp": now + 3600,
        }
        parts = [{"alg": "RS256", "typ": "JWT"}, claims]
        token = ".".join(_b64(json.dumps(p).encode()) for p in parts) + "." + _b64(b"unsigned")
        return AccessToken(token, now + 3600)

    def __hash__(self) -> int:  # Metaflow's client cache keys on the credential
        return 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _AzuriteToken)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class AzuriteClientProvider:
    name = "azurite"

    @staticmethod
    def create_cacheable_azure_credential(*_args: Any, **_kwargs: Any) -> Any:
        return _AzuriteToken()
