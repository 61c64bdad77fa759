"""Imports point down only: app, cli -> api -> service -> (domain, store) -> tables.
`domain` and `errors` import nothing but the standard library."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "keystore_service"

# module -> the project modules it may import (its own layer and below)
ALLOWED = {
    "domain": set(),
    "errors": set(),
    "canonical": set(),
    "settings": set(),
    "tables": set(),
    "sql": set(),
    "db": {"errors"},
    "store": {"domain", "db", "sql", "tables"},
    "accounts": {"db", "sql", "tables"},
    "auth": {"errors", "accounts"},
    "service": {"domain", "errors", "store", "accounts", "reviews", "tracestore"},
    "tracestore": {"db", "domain", "sql", "tables"},
    "reviews": {"db", "domain", "sql", "tables"},
    "schemas": {"settings", "versions", "queries"},
    "queries": set(),
    "versions": set(),
    "batch": {"domain", "errors", "service", "store"},
    "render": {"errors", "domain", "versions", "reviews", "logs"},
    "openapi": {"schemas", "hook_schemas"},
    "api": {"canonical", "errors", "schemas", "auth", "batch", "domain", "render", "service",
            "versions", "hooks"},
    "server": {"accounts", "app", "db", "errors", "logs", "metrics", "migrate", "service",
               "settings"},
    "gunicorn_conf": {"server", "settings"},
    "migrate": {"db"},
    "app": {"canonical", "db", "errors", "openapi", "accounts", "auth", "batch", "render",
            "service", "settings", "store", "api", "reviews", "metrics", "jobs", "operations",
            "report", "ratelimit", "oversight", "secretstore", "ui", "ui_errors", "waiting",
            "bodies", "gateway", "hooks_api", "forwarded", "tracestore"},
    "cli": {"migrate", "accounts", "db", "render", "server", "service", "settings", "app",
            "logs", "queries", "backup", "config_report", "cli_hooks"},
    "cli_hooks": {"errors", "hook_schemas", "render", "sealing"},
    # deploy and operate (issue 16): backups, the configuration report, proxy addresses
    "backup": {"db", "migrate"},
    "config_report": {"settings"},
    "forwarded": set(),
    "operations": {"domain", "errors", "accounts", "reviews", "service", "sql", "tables"},
    "jobs": {"domain", "report", "service", "sql", "tables"},
    "report": {"domain", "db", "sql", "tables"},
    "metrics": {"db", "domain", "service", "sql", "tables"},
    "ratelimit": {"errors", "db", "sql", "tables"},
    "oversight": {"db", "domain", "sql", "tables"},
    "secretstore": {"db", "sql", "tables"},
    # the operators' page: an entry point like api, never SQL of its own
    "ui": {"accounts", "domain", "errors", "hooks", "operations", "signins", "ui_bodies",
           "ui_chart", "ui_errors", "ui_forms", "ui_hooks", "ui_session", "ui_text"},
    # its Webhooks section: views that ui adds to its blueprint; the gateway's use cases
    "ui_hooks": {"errors", "ui_bodies", "ui_errors", "ui_forms"},
    "ui_bodies": set(),
    "signins": {"db", "domain", "sql", "tables"},
    "ui_errors": {"errors", "ui_forms", "render"},
    "ui_session": {"domain"},
    "ui_forms": {"canonical", "hook_schemas", "queries", "schemas"},
    "ui_text": {"domain", "ui_bodies", "versions"},
    "ui_chart": set(),
    "waiting": set(),
    "bodies": {"errors"},
    "logs": set(),
    # the gateway: its storage beside the records' store, its views beside api's
    "sealing": {"errors"},
    "sourcestore": {"db", "domain", "sql", "tables"},
    "hookstore": {"db", "domain", "sql", "tables"},
    "hook_schemas": {"hooks", "queries", "schemas", "settings"},
    "hooks_api": {"api", "auth", "bodies", "errors", "hook_schemas", "hooks", "render"},
    "gateway": {"accounts", "db", "hooks", "hooks_api", "hookstore", "reviews", "sealing",
                "service", "settings", "sourcestore", "store"},
}

# keystore_service/hooks/: the gateway's use cases (module -> project modules it may import;
# `providers` and the other names of this folder are its own modules)
HOOKS = PACKAGE / "hooks"
HOOKS_ALLOWED = {
    "rules": {"canonical", "domain"},
    "destinations": set(),
    "ingest": {"domain", "errors", "accounts", "hookstore", "reviews", "sealing", "service",
               "sourcestore", "store", "providers", "rules"},
    "sources": {"domain", "errors", "sealing", "sourcestore", "destinations", "providers",
                "ingest"},
    "deliveries": {"domain", "errors", "hookstore", "reviews", "sourcestore", "sql", "store",
                   "tables", "rules"},
    "forwarding": {"domain", "hookstore", "reviews", "sealing", "sourcestore", "store",
                   "destinations", "rules", "providers"},
    "relay": {"errors", "forwarding", "rules"},
}


def test_the_gateways_modules_point_down_only():
    modules = {p.stem for p in HOOKS.glob("*.py") if p.stem != "__init__"}
    assert modules == set(HOOKS_ALLOWED), "add new modules of hooks/ to HOOKS_ALLOWED"
    for name, allowed in HOOKS_ALLOWED.items():
        extra = project_imports(HOOKS / f"{name}.py") - allowed
        assert not extra, f"hooks/{name} imports {extra}"


def project_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level >= 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "keystore_service"):
            parts = node.module.split(".")
            found.add(parts[1] if len(parts) > 1 else node.names[0].name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("keystore_service."):
                    found.add(alias.name.split(".")[1])
    return found


def test_every_module_is_in_the_layer_map():
    modules = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert modules == set(ALLOWED), "add new modules to ALLOWED with their layer"


def test_imports_point_down_only():
    for name, allowed in ALLOWED.items():
        extra = project_imports(PACKAGE / f"{name}.py") - allowed
        assert not extra, f"{name} imports {extra}"


def test_the_domain_and_errors_use_only_the_standard_library():
    for name in ("domain", "errors"):
        tree = ast.parse((PACKAGE / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = {node.module.split(".")[0]}
            else:
                continue
            assert roots <= set(sys.stdlib_module_names), f"{name} imports {roots}"


PROVIDERS = PACKAGE / "hooks" / "providers"
# The provider rules are pure: the standard library, and the reference library of the one
# provider whose scheme is a published standard (Standard Webhooks).
PROVIDER_LIBRARIES = set(sys.stdlib_module_names) | {"standardwebhooks"}


def test_the_provider_rules_are_pure():
    for path in PROVIDERS.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level >= 1:
                assert node.level == 1, f"{path.name} reaches outside providers/"
                continue
            if isinstance(node, ast.Import):
                roots = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                roots = {node.module.split(".")[0]}
            else:
                continue
            assert roots <= PROVIDER_LIBRARIES, f"{path.name} imports {roots}"
