"""A request's JSON body or query as one of web/api's pydantic models, the same for every
endpoint (api.py, gateway_api.py): a body that is not one JSON object, or does not match the
model, is InvalidRequest (400) with field + message details, never the input value."""
from __future__ import annotations

from typing import TypeVar

from flask import request
from pydantic import BaseModel, ValidationError

from keystore_service import errors
from keystore_service.domain import canonical
from keystore_service.web.api.render import validation_details

M = TypeVar("M", bound=BaseModel)


def body(model: type[M]) -> M:
    """This request's body (read once, not cached) as `model`."""
    try:
        data = canonical.parse_json_object(request.get_data(cache=False))
    except ValueError as exc:
        raise errors.InvalidRequest(str(exc)) from None
    return validate(model, data)


def validate(model: type[M], data: dict) -> M:
    """`data` (a body or a query's arguments) as `model`."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise errors.InvalidRequest("the request does not match the schema",
                                    details=validation_details(exc)) from None
