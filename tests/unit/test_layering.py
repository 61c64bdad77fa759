"""The folders are the layers, and imports point down only:

    app, bootstrap, cli, server (wiring)  ->  web  ->  gateway  ->  service  ->  storage  ->  domain

`errors`, `settings` and `logs` sit beside every layer. The domain imports nothing of the
project and only the standard library (and the RFC 8785 library its canonical form uses);
every SQL statement lives in storage/, so only storage/ imports the tables, the compiled
statements and the database; the provider rules are pure. A module added anywhere is checked
by the folder it is in; a new top-level module must be named here.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "keystore_service"
LAYERS = ["domain", "storage", "service", "gateway", "web"]  # each may import those before it
BESIDE = {"errors", "settings", "logs"}  # any layer may import these (they import nothing)
WIRING = {"app", "bootstrap", "server", "gunicorn_conf", "config_report"}
# bootstrap.build is the one composition root: the only module that constructs stores
ROOT = "bootstrap"
WIRING |= {"sealing_keys"}  # a process's sealing keys, checked against its database
WIRING |= {"slow_clients"}  # server.py's worker: deadlines for slow clients (gunicorn)
# The `keystore` command, a folder of wiring: one module per command group, and the modules
# the groups share. Nothing outside it imports it; a group's module imports no other group's.
CLI = {"cli"}
CLI_SHARED = {"cli.common", "cli.params", "cli.source_options"}
WIRING |= CLI
SQL = {"storage.tables", "storage.sql", "storage.db"}  # only storage/ (and wiring) use them


def imports(path: Path) -> set[str]:
    """The project modules a file imports, as `folder.module` or a top-level name."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("keystore_service"):
            parts = node.module.split(".")[1:]
            if not parts:
                found.update(a.name for a in node.names)
            elif len(parts) == 1 and parts[0] in [*LAYERS, *CLI]:
                found.update(f"{parts[0]}.{a.name}" for a in node.names)
            else:
                found.add(".".join(parts[:2]))
        elif isinstance(node, ast.Import):
            found.update(".".join(a.name.split(".")[1:3]) for a in node.names
                         if a.name.startswith("keystore_service."))
    return found


def layer_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def modules() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "migrations" not in p.parts]


def test_the_top_level_holds_only_the_wiring_and_what_sits_beside_every_layer():
    top = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert top == (WIRING - CLI) | BESIDE, "put a new module in the folder of its layer"
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(LAYERS) | CLI


def test_imports_point_down_only():
    for path in modules():
        layer = layer_of(path)
        if layer in WIRING:
            continue
        allowed = BESIDE - {layer} if layer in BESIDE else set()
        if layer in LAYERS:
            allowed |= set(LAYERS[:LAYERS.index(layer) + 1]) | BESIDE
        for name in imports(path):
            assert name.split(".")[0] in allowed, f"{path.relative_to(PACKAGE)} imports {name}"


def test_only_the_entry_point_imports_the_cli_and_its_groups_stand_alone():
    for path in modules():
        used = {name for name in imports(path) if name.split(".")[0] in CLI}
        if layer_of(path) not in CLI:
            assert not used, f"{path.relative_to(PACKAGE)} imports the command line"
        elif path.stem != "__init__":
            assert used <= CLI_SHARED, f"cli/{path.name} imports {used - CLI_SHARED}"


def test_every_sql_statement_is_in_storage():
    for path in modules():
        if layer_of(path) in {"storage"} | WIRING:
            continue
        used = imports(path) & SQL
        if path.relative_to(PACKAGE).as_posix() == "web/context.py":
            used -= {"storage.db"}  # it holds the process's Database (its type), runs nothing
        assert not used, f"{path.relative_to(PACKAGE)} builds SQL"
        text = path.read_text()
        assert "from sqlalchemy" not in text and "import sqlalchemy" not in text, \
            f"{path.relative_to(PACKAGE)} uses SQLAlchemy"


def test_the_domain_uses_only_the_standard_library():
    allowed = set(sys.stdlib_module_names) | {"rfc8785", "keystore_service"}
    for path in (PACKAGE / "domain").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                roots = {node.module.split(".")[0]}
            else:
                continue
            assert roots <= allowed, f"domain/{path.name} imports {roots}"
        assert not {i for i in imports(path) if not i.startswith("domain.")}, path.name


PROVIDERS = PACKAGE / "gateway" / "providers"
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


BENCH = PACKAGE.parent / "bench"


def bench_imports(path: Path) -> set[str]:
    """The bench modules a bench module imports, at any depth (TYPE_CHECKING, in a function)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 1 and not module:  # from . import a, b
                found.update(a.name for a in node.names)
            elif node.level == 1 or module.startswith("bench."):
                found.add(module.removeprefix("bench.").split(".")[0])
    return found - {"__main__"}


def test_the_bench_modules_import_one_another_without_a_cycle():
    """What several of bench/'s modules share is in bench/common.py, which imports none of
    them (gateway -> scenarios -> sweep -> scenarios was a cycle)."""
    graph = {p.stem: bench_imports(p) for p in BENCH.glob("*.py")}
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, " -> ".join((*path, name))
        if name not in done:
            for dep in sorted(graph.get(name, ())):
                visit(dep, (*path, name))
            done.add(name)
    for name in sorted(graph):
        visit(name, ())
    assert graph["common"] <= {"rate"} and graph["rate"] == set()


def _functions(path: Path):
    return [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)]


def test_the_retry_on_conflict_loop_is_written_once():
    """A function that loops and then gives up with 503 is a retry-on-conflict loop: only
    service/phases.py has one (every use case returns AGAIN to it instead)."""
    for path in modules():
        for fn in _functions(path):
            loops = any(isinstance(n, (ast.For, ast.While)) for n in ast.walk(fn))
            gives_up = any(isinstance(n, ast.Raise) and n.exc is not None
                           and "Unavailable" in ast.unparse(n.exc) for n in ast.walk(fn))
            where = f"{path.relative_to(PACKAGE)}: {fn.name}"
            assert not (loops and gives_up) or where == "service/phases.py: retry_on_conflict", \
                f"{where} retries on its own: return phases.AGAIN to phases.atomic_phase"


def test_lease_tokens_are_made_in_one_place():
    for path in modules():
        if path.relative_to(PACKAGE).as_posix() == "service/fencing.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            assert not (isinstance(node, ast.Constant) and isinstance(node.value, str)
                        and node.value == "lt_"), \
                f"{path.relative_to(PACKAGE)} makes a lease token: use fencing.new_lease_token"


WEB = PACKAGE / "web"
WEB_TOP = {"errors", "forwarded", "context"}  # beside web/api/ and web/ui/: the error
# rendering, a parser, and what the views hold (web.context.keystore(), the typed accessor)
# The request vocabulary the page's forms validate with (the same bounds as the API's): the
# only modules of web/api/ that web/ui/ imports. Everything else crosses through web/errors.py,
# the one module that imports from both folders (each folder may import it).
UI_USES_OF_API = {"web.api.schemas", "web.api.gateway_schemas", "web.api.queries",
                  "web.api.bulk_schemas"}
ENDPOINTS = {"web.api.api", "web.api.gateway_api", "web.api.bulk_api"}  # neither imports the other (shared: parsing)


def web_imports(path: Path) -> set[str]:
    """The modules of web/ a file imports, each as its full name (`web.api.schemas`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "keystore_service.web"):
            base = node.module.split(".")[1:]
            for a in node.names:
                sub = WEB.joinpath(*base[1:], a.name)
                found.add(".".join([*base, a.name]) if sub.with_suffix(".py").exists()
                          or sub.is_dir() else ".".join(base))
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".", 1)[1] for a in node.names
                         if a.name.startswith("keystore_service.web"))
    return found


def test_web_is_the_api_and_the_page_which_meet_only_in_errors():
    top = {p.stem for p in WEB.glob("*.py") if p.stem != "__init__"}
    assert top == WEB_TOP, "a module of web/ goes in web/api/ or web/ui/"
    assert {p.name for p in WEB.iterdir() if p.is_dir() and p.name != "__pycache__"} == \
        {"api", "ui"}
    for path in WEB.rglob("*.py"):
        rel = path.relative_to(WEB)
        used = web_imports(path)
        if rel.parts[0] == "api":
            assert not {u for u in used if u.startswith("web.ui")}, f"web/{rel} imports the page"
        elif rel.parts[0] == "ui":
            api = {u for u in used if u.startswith("web.api")}
            assert api <= UI_USES_OF_API, f"web/{rel} imports {api - UI_USES_OF_API}"
        elif rel.stem == "forwarded":
            assert not used, f"web/{rel} imports {used}"
        name = ".".join(("web", *rel.with_suffix("").parts))
        if name in ENDPOINTS:
            assert not used & (ENDPOINTS - {name}), f"web/{rel} imports the other endpoints"
    # what the page and the API share is checked to be used as said, so the list cannot rot
    ui_uses = set().union(*(web_imports(p) for p in (WEB / "ui").rglob("*.py")))
    assert UI_USES_OF_API <= ui_uses and "web.errors" in ui_uses


MAY_BUILD = {  # wiring that runs without the service, and why
    "server.py": {"Accounts"},  # the first start's operator token, before the workers fork
    "cli/common.py": {"Accounts"},  # the account commands: one connection, no service
    "sealing_keys.py": {"CheckStore"},  # bootstrap's helper: the keys checked at start
}


def store_classes() -> set[str]:
    """The classes of storage/ made from a database: the stores."""
    names = set()
    for path in (PACKAGE / "storage").glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef):
                for f in node.body:
                    if (isinstance(f, ast.FunctionDef) and f.name == "__init__"
                            and len(f.args.args) > 1 and f.args.args[1].arg in ("database", "db")):
                        names.add(node.name)
    return names


def test_only_the_composition_root_builds_stores():
    """bootstrap.build makes every store of a running process (issue 26 move 5); storage/
    builds its own parts. The CLI's maintenance commands that run without the service (db,
    backups) are the named exceptions."""
    stores = store_classes()
    assert {"RecordStore", "Accounts", "HookStore"} <= stores
    may = {"storage", ROOT}
    for path in modules():
        if layer_of(path) in may:
            continue
        made = {n.func.id for n in ast.walk(ast.parse(path.read_text()))
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in stores}
        made |= {n.func.attr for n in ast.walk(ast.parse(path.read_text()))
                 if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and n.func.attr in stores}
        assert not made - MAY_BUILD.get(str(path.relative_to(PACKAGE)), set()), \
            f"{path.relative_to(PACKAGE)} builds {made}: build it in bootstrap.build"


def test_views_reach_the_keystore_through_one_typed_accessor():
    for path in modules():
        if path.relative_to(PACKAGE).as_posix() in {"web/context.py", "app.py"}:
            continue
        assert 'extensions["keystore' not in path.read_text(), \
            f"{path.relative_to(PACKAGE)}: use web.context.keystore()"
