"""The test suite's shared parts, one home each (tests/README.md says what is where):

    clock    T0, SECOND, FakeClock: a fixed "now" and a clock moved by hand
    server   Server: the one starter of a real server (`keystore serve`, or gunicorn with
             the config module); free_port, KEYSTORE, keystore_cli
    tokens   new_token: the one token helper
    sink     EffectSink: the one effect sink (the downstream system that must act once)
    downstream  Downstream: a scripted invoices API for sends (faults by request or key)
    http     Api (requests to a real server), Http (Flask's test client)
    nginx    Nginx: the TLS proxy recipe as a real nginx on loopback

`from tests.support import X` works for each of these names.
"""
from .clock import SECOND, T0, FakeClock
from .http import Api, Http
from .server import GUNICORN, KEYSTORE, Server, free_port, keystore_cli
from .sink import EffectSink
from .tokens import new_token

__all__ = ["SECOND", "T0", "FakeClock", "Api", "Http", "GUNICORN", "KEYSTORE", "Server",
           "free_port", "keystore_cli", "EffectSink", "new_token"]
