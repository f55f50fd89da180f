"""The jobs' argument parser (jobs/parser.py): a misspelt option is named, not taken for another."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from jobs import batch_layer, cli
from jobs.parser import OneLineParser


def error_of(
    main_or_parse: Callable[[list[str]], object],
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
) -> str:
    with pytest.raises(SystemExit) as raised:
        main_or_parse(argv)
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    return err


def test_a_misspelt_option_is_named_before_a_missing_required_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = error_of(
        batch_layer.main, ["--strat", "2026-11-28T05:00Z", "--end", "not a time"], capsys
    )
    assert err == (
        "python -m jobs.batch_layer: error: unrecognized argument --strat: "
        "did you mean --start? (see --help)\n"
    )


def test_an_abbreviation_is_not_taken_for_the_option_it_begins(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--form used to be --format, which refused the time it was given."""
    err = error_of(
        cli.build_parser().parse_args,
        ["query", "event_counts_1m", "--form", "2026-11-28T05:00Z"],
        capsys,
    )
    assert err == (
        "tributary query: error: unrecognized argument --form: "
        "did you mean --format or --from? (see --help)\n"
    )


def test_an_option_with_nothing_close_is_named_alone(capsys: pytest.CaptureFixture[str]) -> None:
    parser = OneLineParser(prog="p")
    parser.add_argument("--start", required=True)
    err = error_of(parser.parse_args, ["--xyz=1", "--qq"], capsys)
    assert err == "p: error: unrecognized arguments --xyz; --qq (see --help)\n"


def test_what_is_spelt_right_still_parses() -> None:
    parser = OneLineParser(prog="p")
    parser.add_argument("--start", required=True)
    parser.add_argument("--offset", type=int)
    parser.add_argument("rest", nargs="*")
    args = parser.parse_args(["--start", "a", "--offset", "-3", "-7"])
    assert (args.start, args.offset, args.rest) == ("a", -3, ["-7"])


def test_a_missing_required_option_is_still_reported(capsys: pytest.CaptureFixture[str]) -> None:
    err = error_of(batch_layer.main, ["--end", "2026-11-28T05:00Z"], capsys)
    assert "the following arguments are required: --start" in err


def test_a_value_taken_for_a_positional_does_not_hide_the_misspelt_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = error_of(
        cli.build_parser().parse_args,
        ["query", "--form", "2026-11-28T05:00Z", "event_counts_1m"],
        capsys,
    )
    assert "unrecognized argument --form: did you mean --format or --from?" in err


def test_the_batch_revenue_job_refuses_a_reversed_interval_before_spark(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from jobs import batch_revenue
    from jobs.contract import Exit

    status = batch_revenue.main(["--start", "2026-11-28T06:00Z", "--end", "2026-11-28T05:00Z"])
    assert status == Exit.BAD_REQUEST
    assert "empty or reversed" in capsys.readouterr().err
