"""The JSON API: /v1 endpoints, their request schemas, the OpenAPI document, request bodies
and JSON rendering. Imports nothing from web/ui/ (tests/unit/test_layering.py)."""
