"""Metaflow client providers for storage emulators, loaded through Metaflow's extension mechanism.

Metaflow builds its GCS and Azure clients from a pluggable client provider (default: Google's and
Azure's default credential chains, which need real cloud accounts). These providers hand Metaflow's
own datastore and client factories the credentials an emulator takes instead: anonymous for
gcp-storage-emulator, for Azurite (which takes Metaflow's bearer tokens over HTTPS only, in its
``--oauth basic`` mode) a token with the claims Azurite checks. Selected with
``METAFLOW_DEFAULT_GCP_CLIENT_PROVIDER=emulator`` and ``METAFLOW_DEFAULT_AZURE_CLIENT_PROVIDER=azurite``.
"""

GCP_CLIENT_PROVIDERS_DESC = [("emulator", ".emulator_clients.GcsEmulatorClientProvider")]
AZURE_CLIENT_PROVIDERS_DESC = [("azurite", ".emulator_clients.AzuriteClientProvider")]
