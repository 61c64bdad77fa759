"""The operators' page's form fields, checked by the same rules as the API: a record
reference (scope and key) and the optional result of a resolution."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Optional

from pydantic import ValidationError

from . import canonical, schemas

MAX_RESULT_BYTES = 256 * 1024  # the contract's limit on a result body, in canonical form


SCOPE_RULE = "a scope is 1 to 128 characters of A-Z a-z 0-9 _ . : -"
KEY_RULE = "a key is 1 to 512 characters, none of them a control character"


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


def optional_int(fields: Mapping[str, str], name: str) -> Optional[int]:
    text = (fields.get(name) or "").strip()
    if not text:
        return None
    if not text.isdigit() or len(text) > 18:
        raise FormError(f"{name.replace('_', ' ')} must be a whole number")
    return int(text)


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
        raise FormError("the result is over 256 KiB")
    return text.decode("utf-8"), resource_id


def _first_problem(exc: ValidationError) -> str:
    e = exc.errors(include_input=False, include_url=False, include_context=False)[0]
    field = ".".join(str(p) for p in e["loc"]).replace("_", " ") or "the form"
    return f"{field}: {e['msg']}"
