"""The inbound webhook gateway: providers (pure rules: signatures, event ids), ingest (record
the event once, answer at once) and the relay (forward each accepted event once)."""
