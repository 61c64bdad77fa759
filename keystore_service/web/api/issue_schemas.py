"""The issues' and alert channels' wire models, validated like schemas.py (strict types,
unknown fields refused); /openapi.json is generated from them too."""
from __future__ import annotations

from typing import Annotated, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, RootModel, StringConstraints

from keystore_service.domain import issues as words
from keystore_service.domain.names import NAME_PATTERN
from keystore_service.web.api.schemas import Int, Text, _Body, _Out

IssueKind = Literal[words.KINDS]
IssueState = Literal[words.ISSUE_STATES]
ChannelName = Annotated[str, StringConstraints(pattern=NAME_PATTERN), Field(
    description="1-64 of a-z 0-9 _ -, unique per tenant")]
# One plain address (local@domain), ASCII, no spaces, quotes, angle brackets, commas or
# CR/LF: it goes into a To header, and one header is one recipient.
EmailAddress = Annotated[str, StringConstraints(
    max_length=254, pattern=r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@"
                            r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                            r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$"),
    Field(description="one address, local@domain (ASCII; no display name)")]
ChannelUrl = Text(1, 2048, writeOnly=True, description=(
    "slack: the incoming-webhook URL (Mattermost's too); webhook: any http(s) URL. The "
    "destination rules apply (link-local and metadata addresses refused). Write-only: "
    "answers show its scheme and host only"))
ChannelSecret = Text(1, 512, writeOnly=True, description=(
    "webhook only: whsec_ + base64 of 24-64 bytes; each notice is signed per Standard "
    "Webhooks with it. Write-only"))
Kinds = Annotated[list[IssueKind], Field(min_length=1, max_length=len(words.KINDS),
                                         description="the issue kinds told (default: all)")]
REMIND = ("Seconds between reminders while an issue stays open and unacknowledged: 0 (never) "
          "or 5 to 2,592,000; default 14,400 (4 h)")


# 0 or 5..30 days, as the schema says it exactly (1-4 are refused by it, not by a check).
Remind = Annotated[Union[Literal[0], Int(words.REMIND_MIN, 30 * 86_400)],
                   Field(description=REMIND)]


class _Channel(_Body):
    name: ChannelName
    kinds: Optional[Kinds] = None
    remind_after_seconds: Remind = words.REMIND_DEFAULT
    daily_report: bool = False


class SlackChannel(_Channel):
    kind: Literal["slack"]
    url: ChannelUrl


class WebhookChannel(_Channel):
    kind: Literal["webhook"]
    url: ChannelUrl
    secret: Optional[ChannelSecret] = None


class EmailChannel(_Channel):
    kind: Literal["email"]
    to: EmailAddress


class ChannelCreate(RootModel[Annotated[Union[SlackChannel, WebhookChannel, EmailChannel],
                                        Field(discriminator="kind")]]):
    """One of the three kinds, each with the fields it takes (a field another kind takes is
    refused as unknown)."""


class ChannelChange(_Body):
    """PATCH: what is given changes; the name and kind do not."""

    url: Optional[ChannelUrl] = None
    secret: Optional[ChannelSecret] = None
    to: Optional[EmailAddress] = None
    kinds: Optional[Kinds] = None
    remind_after_seconds: Optional[Remind] = None
    daily_report: Optional[bool] = None


class IssuesQuery(BaseModel):
    model_config = ConfigDict(extra="forbid")
    state: Optional[IssueState] = None
    kind: Optional[IssueKind] = None


# --- answers --------------------------------------------------------------------------------

class IssueOut(_Out):
    id: int
    kind: IssueKind
    subject: str = Field(description="the source's name; reviews_waiting: <scope>/<review kind>")
    state: IssueState
    opened_at: str
    last_seen_at: str
    count: int = Field(description="how many events or reviews are behind it, at the last look")
    resolved_at: Optional[str]
    acknowledged_by: Optional[str]
    detail: Optional[str] = Field(description="what opened it, in a line")
    url: str = Field(description="its place on the operators' page")


class IssueResponse(_Out):
    issue: IssueOut


class IssuesResponse(_Out):
    issues: list[IssueOut]


class ChannelOut(_Out):
    name: str
    kind: Literal[words.CHANNEL_KINDS]
    url: Optional[str] = Field(description="scheme and host only (the rest is a credential)")
    has_secret: Optional[bool] = Field(description="null if no configured key opens it")
    to: Optional[str]
    kinds: Optional[list[IssueKind]] = Field(description="null: every kind")
    remind_after_seconds: int
    daily_report: bool
    created_at: str
    updated_at: str


class ChannelResponse(_Out):
    channel: ChannelOut


class ChannelsResponse(_Out):
    channels: list[ChannelOut]


class TestQueued(_Out):
    status: Literal["queued"]


MODELS = [ChannelCreate, ChannelChange, IssueResponse, IssuesResponse, ChannelResponse,
          ChannelsResponse, TestQueued]
