"""What the tests share: helpers, in-test servers and emulators, fakes, hand-made card payloads,
the Chromium fixtures, and the scripts some tests run as child processes. Imported as
``tests.support.<module>`` (pyproject's pytest ``pythonpath`` puts the repository's root on the path)."""
