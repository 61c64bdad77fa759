"""The operators' page's form and query fields, checked by the same rules as the API: a
record reference (scope and key), a whole number, a report day, the optional result of a
resolution, the page to go to after signing in, and the Webhooks section's source name,
event id, delivery state, cursor and confirmation box. Every refusal is a FormError (a 400 page);
nothing a person or a tamperer types reaches int(), date() or a header unchecked."""
from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date
from typing import Optional
from urllib.parse import urlencode

from pydantic import TypeAdapter, ValidationError
from werkzeug.datastructures import MultiDict

from keystore_service.domain import canonical
from keystore_service.domain.deliveries import DELIVERY_STATES
from keystore_service.domain.records import MAX_RESULT_BYTES
from keystore_service.gateway.rules import scope_of
from keystore_service.web.api import gateway_schemas, queries, schemas

MAX_BIGINT = 2**63 - 1  # what the database's BIGINT holds
FIRST_REPORT_DAY = queries.FIRST_REPORT_DAY
_WHOLE = re.compile("[0-9]{1,19}")  # ASCII: str.isdigit() takes "²", which int() refuses
# After signing in, only a page of the page: /ui/<name> and a query of URL characters (what
# url_for writes). No "." or "/" in the path (no "/ui/../", "/ui//host"), no space, no control
# character, no backslash, nothing outside ASCII: the value goes into a Location header.
_NEXT = re.compile(r"/ui/[a-z]*(\?[A-Za-z0-9\-._~!$&'()*+,;=:@/?%]*)?")
MAX_NEXT = 2048  # longer than any address the page makes; a browser's own limit is larger


SCOPE_RULE = "a scope is 1 to 128 characters of A-Z a-z 0-9 _ . : -"
KEY_RULE = "a key is 1 to 512 characters, none of them a control character"
SOURCE_RULE = "a source name is 1 to 64 characters of a-z 0-9 _ -"
EVENT_ID_RULE = "an event id is 1 to 512 characters, none of them a control character"
_SOURCE_NAME = TypeAdapter(gateway_schemas.SourceName)
_CURSOR = re.compile(queries.CURSOR_PATTERN[1:-1])  # fullmatch: without ^ and $


class FormError(ValueError):
    """A field a person typed cannot be used; the message says which and why."""


def record_ref(fields: Mapping[str, str]) -> tuple[str, str]:
    """(scope, key) from the fields `scope` and `key`, as the API would accept them."""
    try:
        ref = schemas.RecordRef(scope=fields.get("scope", ""), key=fields.get("key", ""))
    except ValidationError as exc:
        field = exc.errors(include_input=False)[0]["loc"][0]
        raise FormError(SCOPE_RULE if field == "scope" else KEY_RULE) from None
    return ref.scope, ref.key


def optional_int(fields: Mapping[str, str], name: str, least: int = 0) -> Optional[int]:
    """The field as a whole number written in 0-9, least..2^63-1; None when it is empty."""
    text = (fields.get(name) or "").strip()
    if not text:
        return None
    if not _WHOLE.fullmatch(text) or not least <= int(text) <= MAX_BIGINT:
        raise FormError(f"{name.replace('_', ' ')} must be a whole number from {least} to "
                        f"{MAX_BIGINT}")
    return int(text)


def report_day(text: str) -> date:
    """A day for the figures, by the API's rule (queries.report_day)."""
    try:
        return queries.report_day(text)
    except ValueError as exc:
        raise FormError(str(exc)) from None


def safe_next(target: Optional[str]) -> Optional[str]:
    """`target` if it is a page of this site's /ui/ to go to after signing in, else None
    (a tampered value is dropped, not refused: signing in still works)."""
    if target and len(target) <= MAX_NEXT and _NEXT.fullmatch(target):
        return target
    return None


def result(fields: Mapping[str, str]) -> tuple[Optional[str], Optional[str]]:
    """The result a person gave with mark succeeded / mark failed, as (canonical JSON text,
    resource id); (None, None) when every field is empty. The body must be JSON (any value),
    parsed as strictly as a request body."""
    resource_id = (fields.get("resource_id") or "").strip() or None
    status_code = optional_int(fields, "status_code")
    body_text = (fields.get("body") or "").strip()
    body = None
    if body_text:
        try:  # the request parser's strictness, for a value: wrap it in an object
            wrapped = canonical.parse_json_object(b'{"body":' + body_text.encode("utf-8")
                                                  + b"}")
        except ValueError as exc:
            raise FormError(f"the body is not valid JSON: {exc}") from None
        if list(wrapped) != ["body"]:
            raise FormError("the body must be a single JSON value")
        body = wrapped["body"]
    if resource_id is None and status_code is None and body is None:
        return None, None
    try:
        checked = schemas.ResultIn(resource_id=resource_id, status_code=status_code, body=body)
        text = canonical.canonical(checked.model_dump(exclude_none=True))
    except ValidationError as exc:
        raise FormError(_first_problem(exc)) from None
    except ValueError as exc:
        raise FormError(str(exc)) from None
    if len(text) > MAX_RESULT_BYTES:
        raise FormError(f"the result is over {MAX_RESULT_BYTES // 1024} KiB")
    return text.decode("utf-8"), resource_id


def _first_problem(exc: ValidationError) -> str:
    e = exc.errors(include_input=False, include_url=False, include_context=False)[0]
    field = ".".join(str(p) for p in e["loc"]).replace("_", " ") or "the form"
    return f"{field}: {e['msg']}"


def utf8(raw: bytes) -> bool:
    """The raw query string is UTF-8 (else werkzeug's request.args raises)."""
    try:
        raw.decode()
    except UnicodeDecodeError:
        return False
    return True


def return_address(path: str, args: MultiDict) -> Optional[str]:
    """The address of a GET to come back to after signing in, rebuilt from its parsed query
    (so it is plain ASCII), or None if it is not a safe target (safe_next)."""
    query = urlencode(list(args.items(multi=True)))
    return safe_next(f"{path}?{query}" if query else path)


# --- the Webhooks section ------------------------------------------------------------------

def source_name(text: Optional[str]) -> str:
    """A source's name by the API's rule (gateway_schemas.SourceName)."""
    try:
        return _SOURCE_NAME.validate_python(text or "")
    except ValidationError:
        raise FormError(SOURCE_RULE) from None


def destination_name(text: Optional[str]) -> Optional[str]:
    """A destination's name by the API's rule, or None when none is given."""
    return source_name(text) if text else None


def event_ref(fields: Mapping[str, str]) -> tuple[str, str]:
    """(source name, event id) from the fields `source` and `event_id`: the name by the
    API's rule, the event id by the rule of a record's key (it is the key of its record)."""
    source = source_name(fields.get("source"))
    try:
        ref = schemas.RecordRef(scope=scope_of(source), key=fields.get("event_id", ""))
    except ValidationError:
        raise FormError(EVENT_ID_RULE) from None
    return source, ref.key


def delivery_state(text: Optional[str]) -> Optional[str]:
    """A delivery state to filter by; None for any."""
    if not text:
        return None
    if text not in DELIVERY_STATES:
        raise FormError("state is one of " + ", ".join(DELIVERY_STATES))
    return text


_TYPE_GLOB = TypeAdapter(gateway_schemas.TypeGlob)


def type_glob(text: Optional[str]) -> Optional[str]:
    """An event-type glob by the API's rule (gateway_schemas.TypeGlob); None for any."""
    if not text:
        return None
    try:
        return _TYPE_GLOB.validate_python(text)
    except ValidationError:
        raise FormError("the event type is a glob of 1-256 characters without control "
                        "characters (* any run, ? one character)") from None


def cursor(text: Optional[str]) -> Optional[str]:
    """A next-page cursor of the shape the service gives out (queries.Cursor); None for the
    first page. Whether the service really gave it out is for the list to say."""
    if not text:
        return None
    if not queries.CURSOR_MIN <= len(text) <= queries.CURSOR_MAX or not _CURSOR.fullmatch(text):
        raise FormError("the cursor is not one this service gave out")
    return text


def confirmed(fields: Mapping[str, str], name: str) -> bool:
    """A confirmation box: ticked ("true"), or absent (False); any other value is refused."""
    value = fields.get(name)
    if value in (None, ""):
        return False
    if value != "true":
        raise FormError(f"{name} is either ticked or left out")
    return True
