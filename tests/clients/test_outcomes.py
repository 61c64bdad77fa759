"""The Python client and `keystore-client run` end every answer of the key store the way
docs/outcomes.md says: its two tables are read here and each answer goes through the client's
own code (the exception class of the answer's code, and the exit code `run` gives it)."""
from __future__ import annotations

import re

from keystore_client import Claimed, ConnectError
from keystore_client._cli import exits
from keystore_client._exceptions import BY_CODE

from .conftest import REPO

DOC = (REPO / "docs" / "outcomes.md").read_text()


def table_after(heading: str) -> list:
    """The rows (lists of cell texts) of the first table under `## heading`, header first."""
    section = DOC.split(f"\n## {heading}\n", 1)[1]
    rows = [line for line in section.split("\n\n## ", 1)[0].splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in row.strip("|").split(" | ")] for row in rows]
    return [cells[0], *cells[2:]]


def spans(cell: str) -> list:
    return re.findall(r"`([^`]+)`", cell)


ENDINGS = {code: ending for answer, ending, _ in table_after("Which ending each answer gets")[1:]
           for code in spans(re.sub(r"\([^)]*\)", "", answer))}
HEADER, *IDIOM_ROWS = table_after("Each platform's idiom")
IDIOMS = {row[0]: dict(zip(HEADER[1:], row[1:], strict=True)) for row in IDIOM_ROWS}


def python_ending(code: str) -> str:
    """What the client gives for `code`: `acquired` / `replayed` (a Claimed), or the name of
    the exception it raises."""
    if code in ("acquired", "replay"):
        claimed = Claimed(code, record=None)  # type: ignore[arg-type]
        return "acquired" if claimed.acquired else "replayed" if claimed.replayed else "?"
    return (ConnectError if code == "unreachable" else BY_CODE[code]).__name__


def error_of(code: str):
    cls = ConnectError if code == "unreachable" else BY_CODE[code]
    return cls("test") if code == "unreachable" else cls("test", status=None)


def test_the_doc_lists_every_claim_outcome_and_the_failures():
    assert set(ENDINGS) >= {"acquired", "replay", "in_progress", "needs_reconciliation",
                            "fingerprint_mismatch", "unreachable", "unavailable", "rate_limited"}


def test_the_python_client_ends_every_answer_as_the_doc_says():
    for code, ending in ENDINGS.items():
        assert python_ending(code) in spans(IDIOMS[ending]["Python client"]), (code, ending)


def test_keystore_client_run_exits_as_the_doc_says():
    for code, ending in ENDINGS.items():
        if code in ("acquired", "replay"):
            continue  # the command runs, or its stored output and code are replayed
        got = str(exits.for_error(error_of(code)))
        assert got in spans(IDIOMS[ending]["`keystore-client run`"]), (code, ending, got)


SEND_HEADER, *SEND_ROWS = table_after("A send's answers")
SEND_COLUMN = "Python `KeyStore.send`"


def send_cells() -> list:
    """(the answer codes of a row, the Python client's cell) for each row of "A send's
    answers" that names codes (outside its parentheses)."""
    column = SEND_HEADER.index(SEND_COLUMN)
    rows = [(spans(re.sub(r"\([^)]*\)", "", row[0])), row[column]) for row in SEND_ROWS]
    return [(codes, cell) for codes, cell in rows if codes]


def test_the_send_table_lists_every_answer_of_a_send():
    listed = {code for codes, _ in send_cells() for code in codes}
    assert {"sent", "replay", "failed", "accepted", "in_progress", "fingerprint_mismatch",
            "needs_reconciliation", "unavailable", "rate_limited"} <= listed


def test_the_python_client_maps_every_answer_of_a_send_as_the_doc_says():
    """A returned answer names only properties `Sent` has, true for that outcome; a raised
    one names the exception class of each of its codes."""
    from keystore_client import Sent
    from keystore_client._models import Record
    for codes, cell in send_cells():
        if cell.startswith("returns `Sent`"):
            code = codes[0]
            record = Record(scope="s", key="k", state="failed" if code == "failed" else
                            "succeeded", fingerprint=None, version=None, attempt=1,
                            first_seen_at=None, last_seen_at=None, expires_at=None,
                            lease_expires_at=None, duplicate_count=0, checkpoint=None,
                            result=None, review=None)
            sent = Sent(code, record, None)
            named = [p[1:] for p in spans(cell) if p.startswith(".") and p != ".result"]
            assert named, (code, cell)
            for prop in named:
                assert getattr(sent, prop) is True, (code, prop)
        else:
            raised = [name for name in spans(cell) if name[:1].isupper()]
            for code in codes:
                assert BY_CODE[code].__name__ in raised, (code, cell)
