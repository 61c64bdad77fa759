"""The operators' page under /ui: views, forms, text, templates and static files. Imports
from web/api/ only the request vocabulary (schemas, gateway_schemas, queries) and renders its
errors through web/errors.py (tests/unit/test_layering.py)."""
