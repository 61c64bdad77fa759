"""One process of the concurrent reconciler/sweeper test: runs both jobs and prints counts."""
from __future__ import annotations

import json
import sys

from keystore_service.bootstrap import build
from keystore_service.settings import Settings


def main(url: str) -> None:
    ks = build(Settings(database_url=url))
    reconciled = ks.jobs.reconcile(batch=200)
    swept = ks.jobs.sweep(batch=300)
    reconciled.update(ks.jobs.reconcile(batch=200))  # whatever the others left
    swept += ks.jobs.sweep(batch=300)
    print(json.dumps({"reconciled": dict(reconciled), "swept": swept}))


if __name__ == "__main__":
    main(sys.argv[1])
