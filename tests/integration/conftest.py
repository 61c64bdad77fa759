"""Fixtures for these tests live in tests/conftest.py (shared with tests/security)."""
