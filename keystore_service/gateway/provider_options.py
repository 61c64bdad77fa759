"""A source's provider options as the API gives them (gateway/sources.py): only `generic`
takes rules of its own; the signing secrets each provider needs."""
from __future__ import annotations

from typing import Any, Optional

from keystore_service import errors
from keystore_service.gateway import providers


def plain(model: Any) -> Optional[dict]:
    """A validated model as the plain dict it is stored as (None stays None)."""
    if model is None or isinstance(model, dict):
        return model
    return model.model_dump(by_alias=True, exclude_none=True)


def provider_config(provider: str, signature: Optional[dict], event_id: Optional[dict],
            event_type: Optional[dict] = None) -> dict:
    """The provider options: only `generic` takes a signature rule, an event-id rule and
    an event-type rule (optional: without one its events have no type)."""
    if provider != "generic":
        if signature is not None or event_id is not None or event_type is not None:
            raise errors.InvalidRequest("signature, event_id and event_type are for generic "
                                        "sources", details={"field": "signature"})
        return {}
    if event_id is None or ("header" in event_id) == ("json" in event_id):
        raise errors.InvalidRequest("a generic source's event_id is {\"header\": NAME} or "
                                    "{\"json\": [JSON pointers]}", details={"field": "event_id"})
    config = {"signature": signature, "event_id": event_id}
    if event_type is not None:
        config["event_type"] = event_type
    try:
        providers.provider(provider).validate_config(config)
    except ValueError as exc:
        raise errors.InvalidRequest(str(exc), details={"field": "event_id"}) from None
    return config


def check_secrets(provider: providers.Provider, signing: list[str], config: dict) -> None:
    if not provider.needs_secret(config):
        if signing:
            raise errors.InvalidRequest("a generic source without a signature takes no secrets",
                                        details={"field": "secrets"})
        return
    if not signing:
        raise errors.InvalidRequest("this provider signs its webhooks: give its signing "
                                    "secret (two during a rotation)",
                                    details={"field": "secrets"})
    for n, secret in enumerate(signing):
        try:
            provider.check_secret(secret)
        except providers.BadSecret as exc:
            raise errors.InvalidRequest(f"secrets.{n}: {exc}",
                                        details={"field": f"secrets.{n}"}) from None
