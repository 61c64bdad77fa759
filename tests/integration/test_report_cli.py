"""`keystore report --date` reads a date by the API's rule (issue 13): strictly YYYY-MM-DD in
ASCII digits, 1970-01-01 to 9999-12-30; anything else is a usage error, never a traceback."""
from __future__ import annotations

import json

from click.testing import CliRunner

from keystore_service.cli import main
from tests.support import T0

from .support import BAD_DATES


def report(database_url: str, *args: str):
    return CliRunner().invoke(main, ["report", "--tenant", "acme", *args],
                              env={"KEYSTORE_DATABASE_URL": database_url})


def test_report_dates_follow_the_apis_rule(ks, database_url):
    ks.accounts.create_tenant("acme", T0)
    for day in [*BAD_DATES, "٢٠٢٧-٠١-١٥"]:
        result = report(database_url, "--date", day)
        assert result.exit_code == 2, (day, result.output)
        assert "Invalid value for --date" in result.output, day
        assert result.exception is None or isinstance(result.exception, SystemExit), day
    for day in ("1970-01-01", "2027-01-15", "9999-12-30"):
        result = report(database_url, "--date", day, "--json")
        assert result.exit_code == 0, (day, result.output)
        assert json.loads(result.stdout)["date"] == day  # stderr names the database
    result = report(database_url, "--date", "9999-12-31")
    assert "from 1970-01-01 to 9999-12-30" in result.output
