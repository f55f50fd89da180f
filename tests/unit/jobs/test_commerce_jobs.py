"""The commerce jobs' refusals: a bad argument is one line on standard error and exit 2
(jobs.contract), before anything is sent or started."""

from __future__ import annotations

import pytest

from jobs.contract import Exit


@pytest.mark.parametrize(
    ("module", "argv", "says"),
    [
        ("jobs.generate_commerce", ["--orders", "0"], "--orders: must be at least 1"),
        ("jobs.generate_commerce", ["--orders", "5", "--start", "soon"], "not an ISO-8601 time"),
        ("jobs.generate_commerce", ["--orders", "5", "--start", "2099-01-01T00:00Z"], "too late"),
        ("jobs.commerce", ["--every", "2"], "unrecognized argument --every"),
    ],
)
def test_a_bad_argument_is_refused_in_one_line(
    run_job_here, tmp_path, module: str, argv: list[str], says: str
) -> None:
    ran = run_job_here(module, *argv, TRIBUTARY_STATE=str(tmp_path))
    assert ran.returncode == Exit.BAD_REQUEST
    [line] = ran.stderr.strip().splitlines()
    assert says in line, line
    assert not (tmp_path / "ledgers").exists(), "nothing sent, no ledger"
