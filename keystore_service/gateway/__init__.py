"""The inbound webhook gateway: providers (pure rules: signatures, event ids), ingest (record
the event once, answer at once), the relay (forward each accepted event once) and its one
outbound client; assembly builds them once per process."""
