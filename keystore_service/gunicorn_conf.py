"""A gunicorn configuration that sets up what `keystore serve` does, for running gunicorn
yourself (docs/deployment.md):

    gunicorn -c python:keystore_service.gunicorn_conf --bind 0.0.0.0:8080 [--workers N]

gthread workers (2 x CPUs, 16 threads each), the app built in each worker after the fork with
its reconciler and sweeper timer, metrics summed over the workers in a directory of its own
(removed at exit), and, before the workers start, the database migrated and, on a store with
no tenant, the first operator token printed once. Options on the command line override these.
"""
from keystore_service import server as _server

# First, before anything imports prometheus_client (see server.MULTIPROC_ENV).
_server.metrics_directory()

from keystore_service.settings import load as _load  # noqa: E402

_settings = _load()  # invalid settings stop gunicorn here, naming the variable

wsgi_app = "keystore_service.server:served_app()"
bind = ["127.0.0.1:8080"]
workers = _server.default_workers()
worker_class = _server.OPTIONS["worker_class"]
threads = _server.OPTIONS["threads"]
worker_connections = _server.OPTIONS["worker_connections"]  # pending slow heads included
preload_app = _server.OPTIONS["preload_app"]
timeout = _server.OPTIONS["timeout"]
graceful_timeout = _server.OPTIONS["graceful_timeout"]
keepalive = _server.OPTIONS["keepalive"]
accesslog = _server.OPTIONS["accesslog"]
errorlog = _server.OPTIONS["errorlog"]
proc_name = _server.OPTIONS["proc_name"]
pre_request = _server.OPTIONS["pre_request"]
loglevel = _settings.log_level.lower()
forwarded_allow_ips = _settings.forwarded_allow_ips  # the proxies trusted (deployment.md)
control_socket_disable = True  # gunicorn >= 25.1 (ignored before): instances side by side

on_starting = _server.on_starting
post_fork = _server.post_fork
child_exit = _server.child_exit
