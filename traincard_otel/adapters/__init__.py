"""Framework adapters. Each translates one framework's hooks into :class:`traincard_otel.Reporter`
calls and holds no telemetry logic of its own. Nothing here is imported by ``import traincard_otel``."""
