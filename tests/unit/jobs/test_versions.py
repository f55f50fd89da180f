"""What `python -m jobs.versions` says serving reads after a promotion: the active version is
served only in kappa mode; in lambda mode serving reads batch + speed."""

from __future__ import annotations

from jobs.versions import outcome_line


def test_in_kappa_mode_serving_reads_the_active_version() -> None:
    assert outcome_line("promoted v1", "v1", "kappa") == "==> promoted v1; serving now reads v1"


def test_in_lambda_mode_the_active_version_waits_for_kappa() -> None:
    line = outcome_line("promoted v1", "v1", "lambda")
    assert line == (
        "==> promoted v1; the active version is now v1, which serving reads once the mode is "
        "kappa (TRIBUTARY__MODE=kappa); in lambda mode, as now, serving reads batch + speed"
    )
    assert "serving now reads v1" not in line
