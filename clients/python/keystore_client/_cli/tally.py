"""What `keystore-client each` did with its lines: the counts, the summary line, and the exit
code they give (the most serious kind of line decides; see docs/cli.md)."""
from __future__ import annotations

from dataclasses import dataclass, fields

from . import exits


@dataclass
class Tally:
    ran: int = 0  # the command ran and exited 0: completed
    failed: int = 0  # the command failed (or its lease was taken): left to the next run
    done: int = 0  # already done (at this or a newer version): skipped
    busy: int = 0  # another run holds it: skipped, the next run tries again
    reconcile: int = 0  # an earlier attempt ended unknown: a person resolves it
    mismatch: int = 0  # the same key and version with a different payload: refused
    unusable: int = 0  # not a JSON object, a field missing, or refused as invalid
    not_run: int = 0  # claimed, then released unrun because each stopped early

    LABELS = {"ran": "ran", "failed": "failed", "done": "already done",
              "busy": "in progress elsewhere", "reconcile": "need reconciliation",
              "mismatch": "refused (payload mismatch)", "unusable": "unusable",
              "not_run": "released unrun"}

    @property
    def lines(self) -> int:
        return sum(getattr(self, f.name) for f in fields(self))

    def summary(self) -> str:
        parts = [f"{getattr(self, f.name)} {self.LABELS[f.name]}" for f in fields(self)
                 if getattr(self, f.name)]
        plural = "" if self.lines == 1 else "s"
        return f"{self.lines} line{plural}: {', '.join(parts) or 'nothing to do'}"

    def exit_code(self) -> int:
        """0 when every line ran or was skipped as done or in progress elsewhere."""
        if self.failed:
            return exits.SOME_FAILED
        if self.reconcile:
            return exits.NEEDS_RECONCILIATION
        if self.mismatch:
            return exits.FINGERPRINT_MISMATCH
        if self.unusable:
            return exits.DATA_ERROR
        return 0
