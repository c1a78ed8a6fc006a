"""The package's own test suite (``docs/testing.md``); its shared code is :mod:`tests.support`."""
