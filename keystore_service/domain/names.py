"""The names a tenant gives its sources, connections, alert channels and destinations: 1-64
of a-z 0-9 _ -, so that a name is safe in a URL path, a log line, a metrics label and a
command line as it is, with no escaping and no second spelling (no capitals, no dots)."""
from __future__ import annotations

import re

NAME_PATTERN = r"^[a-z0-9_-]{1,64}$"  # the API's schemas say it as it is checked here
NAME = re.compile(NAME_PATTERN)


def valid(name: object) -> bool:
    return isinstance(name, str) and NAME.fullmatch(name) is not None
