"""The published schema of `POST /v1/sources`: one schema per provider, chosen by `provider`
(oneOf with a discriminator), so that /openapi.json says what the service checks beyond the
shape of SourceCreate (issue 25, item 12): which providers need signing secrets and what
each provider's secrets look like, and that only `generic` takes `signature`, `event_id`
and `event_type`.

Each provider's schema is SourceCreate's as pydantic generates it (fields added there appear
here too), with these parts replaced. What no schema can say stays in the descriptions: a
taken name, a destination whose address is refused, a TTL shorter than the retry window and a
day (tests/fuzz/test_openapi_fuzz.py allows exactly those 400s of a schema-valid request).
"""
from __future__ import annotations

import copy

from keystore_service.gateway import providers

REF = "#/components/schemas/{model}"
GENERIC = "generic"  # the one provider with options (gateway/providers/generic.py)
_NULL_ONLY = {"type": "null", "description": "Only generic sources take this."}
# A generic source's event_id: exactly one of its two rules.
_ONE_RULE = [{"required": ["header"], "properties": {"header": {"type": "string"},
                                                     "json": {"type": "null"}}},
             {"required": ["json"], "properties": {"json": {"type": "array"},
                                                   "header": {"type": "null"}}}]


_ONE_TYPE_RULE = [{"required": ["header"], "properties": {"header": {"type": "string"},
                                                          "json": {"type": "null"}}},
                  {"required": ["json"], "properties": {"json": {"type": "string"},
                                                        "header": {"type": "null"}}}]


def name_of(provider: str) -> str:
    return f"SourceCreate_{provider}"


def per_provider(defs: dict) -> None:
    """Replace defs["SourceCreate"] by a oneOf of one schema per registered provider (added
    to `defs` as SourceCreate_<provider>)."""
    base = defs["SourceCreate"]
    names = providers.names()
    for name in names:
        defs[name_of(name)] = _variant(base, providers.provider(name))
    defs["SourceCreate"] = {
        "title": "SourceCreate",
        "description": "A new source; the rules of its `provider` are in that provider's "
                       "schema.",
        "oneOf": [{"$ref": REF.format(model=name_of(n))} for n in names],
        "discriminator": {"propertyName": "provider", "mapping": {
            n: REF.format(model=name_of(n)) for n in names}}}


def _secrets(provider: providers.Provider, base_secrets: dict, required: bool) -> dict:
    array = copy.deepcopy(next(s for s in base_secrets["anyOf"] if s.get("type") == "array"))
    array["items"]["pattern"] = provider.secret_pattern
    array["description"] = ("The provider's signing secrets: one, or two during a rotation "
                            "(either may sign).")
    return array if required else {"anyOf": [array, {"type": "null"}], "default": None}


def _variant(base: dict, provider: providers.Provider) -> dict:
    out = copy.deepcopy(base)
    out["title"] = name_of(provider.name)
    props = out["properties"]
    props["provider"] = {"const": provider.name, "type": "string"}
    if provider.name != GENERIC:
        props["secrets"] = _secrets(provider, base["properties"]["secrets"], required=True)
        props["signature"] = props["event_id"] = props["event_type"] = _NULL_ONLY
        out["required"] = [*base["required"], "secrets"]
        out["description"] = f"A {provider.name} source: its signing secrets are required."
        return out
    # generic: an event_id rule is required; secrets go with a signature and only with one.
    props["event_id"] = {**props["event_id"]["anyOf"][0], "anyOf": _ONE_RULE,
                         "description": 'Where the event id is: {"header": NAME} or '
                                        '{"json": [JSON pointers]}.'}
    props["secrets"] = _secrets(provider, base["properties"]["secrets"], required=False)
    # an event_type rule is optional; given, it is exactly one of its two rules.
    rule = copy.deepcopy(props["event_type"]["anyOf"][0])
    props["event_type"] = {"anyOf": [{**rule, "anyOf": _ONE_TYPE_RULE}, {"type": "null"}],
                           "default": None,
                           "description": 'Where the event type is: {"header": NAME} or '
                                          '{"json": POINTER}; null: events have no type.'}
    out["required"] = [*base["required"], "event_id"]
    out["if"] = {"required": ["signature"], "properties": {"signature": {"type": "object"}}}
    out["then"] = {"required": ["secrets"], "properties": {"secrets": {"type": "array"}}}
    out["else"] = {"properties": {"secrets": {"type": "null"}}}
    out["description"] = ("A generic source: with a signature it needs its secrets; without "
                          "one (the ingest URL is the only credential) it takes none.")
    return out
