"""One HTTP exchange with the service: send it, say whether a failure could have been
applied, and turn an error answer into the exception for its contract code."""
from __future__ import annotations

from typing import Any, Optional

import requests
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

from ._exceptions import (
    BY_CODE,
    APIError,
    ConnectError,
    OutcomeUnknown,
    UnexpectedResponse,
)
from ._models import Record
from ._retry import parse_retry_after


def send(session: requests.Session, method: str, url: str, *, headers: dict,
         json_body: Any = None, params: Optional[dict] = None,
         timeout: Any = None) -> requests.Response:
    """Send one request. Raises ConnectError when it never left (no connection was made),
    OutcomeUnknown when it may have reached the service but no answer came back."""
    try:
        return session.request(method, url, headers=headers, json=json_body, params=params,
                               timeout=timeout, allow_redirects=False)
    except requests.exceptions.ConnectTimeout as exc:
        raise ConnectError(f"could not connect to {_origin(url)}: timed out") from exc
    except requests.exceptions.ConnectionError as exc:
        if _never_sent(exc):
            raise ConnectError(f"could not connect to {_origin(url)}") from exc
        raise OutcomeUnknown(f"the connection to {_origin(url)} broke before an answer; "
                             "the request may have been applied") from exc
    except requests.exceptions.Timeout as exc:
        raise OutcomeUnknown(f"no answer from {_origin(url)} in time; the request may have "
                             "been applied") from exc


def _never_sent(exc: requests.exceptions.ConnectionError) -> bool:
    """True only when urllib3 failed while opening the connection (refused, unreachable,
    DNS, connect timeout): then not one byte of the request was written. A reset or a close
    after the connection was up is not provable either way."""
    inner = exc.args[0] if exc.args else None
    reason = getattr(inner, "reason", inner)  # urllib3's MaxRetryError wraps the cause
    return isinstance(reason, (NewConnectionError, ConnectTimeoutError))


def _origin(url: str) -> str:
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"


def json_body(response: requests.Response) -> dict:
    """The JSON object of a successful answer; UnexpectedResponse if it is not one."""
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise UnexpectedResponse(f"HTTP {response.status_code} without a JSON object body",
                                 response=response, status=response.status_code)
    return data


def error_from(response: requests.Response) -> APIError:
    """The exception for an error answer: the class of its contract code, carrying status,
    code, message, details, the record (when sent), the claim outcome and Retry-After."""
    retry_after = parse_retry_after(response.headers.get("Retry-After"))
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("code"), str):
        return UnexpectedResponse(f"HTTP {response.status_code} from the key store without "
                                  "a contract error body", response=response,
                                  status=response.status_code, retry_after=retry_after)
    code = error["code"]
    record = body.get("record")
    cls = BY_CODE.get(code, UnexpectedResponse)
    exc = cls(str(error.get("message") or code), response=response,
              status=response.status_code, details=error.get("details"),
              record=Record.from_json(record) if isinstance(record, dict) else None,
              outcome=body.get("outcome"), retry_after=retry_after, body=body)
    if cls is UnexpectedResponse:
        exc.code = code  # a code newer than this client: keep it
    return exc
