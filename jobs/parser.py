"""The one argument parser every job and `tributary` use: a bad argument is one line, not a
usage block, and an option is taken only as spelt."""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from lakehouse.generator.clickstream import ledger_problem


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line, not a usage block, and takes options
    only as spelt: abbreviations are off, and a misspelt option is named, with the close ones.
    A subcommand's parser is one too (add_parser makes it of this class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # With abbreviations, a misspelt option can silently be another one (--form: --format).
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """Unknown options are an error here too: a subcommand's parser is called through this,
        and its unknown options must be named by it, with its own options as suggestions."""
        args = sys.argv[1:] if args is None else list(args)
        # argparse reports a missing required option before an unknown one: `--strat X` said
        # "--start is required". So a first, lenient pass finds the unknown ones.
        with _lenient(self):
            _, extras = super().parse_known_args(args, None)
        unknown = [arg for arg in extras if _is_option(arg)]
        if unknown:
            self.error(self._unrecognized(unknown))
        return super().parse_known_args(args, namespace)

    def _unrecognized(self, unknown: list[str]) -> str:
        known = [option for action in self._actions for option in action.option_strings]
        described = []
        for arg in unknown:
            name = arg.split("=", 1)[0]
            close = difflib.get_close_matches(name, known, n=2, cutoff=0.7)
            described.append(f"{name}: did you mean {' or '.join(close)}?" if close else name)
        noun = "argument" if len(unknown) == 1 else "arguments"
        return f"unrecognized {noun} {'; '.join(described)}"


@contextmanager
def _lenient(parser: argparse.ArgumentParser) -> Iterator[None]:
    """Within this block `parser` requires none of its arguments (a subcommand included) and
    takes any value: a misspelt option is named before a missing or bad value it explains."""
    saved = [(action, action.required, action.type, action.choices) for action in parser._actions]
    groups = [(group, group.required) for group in parser._mutually_exclusive_groups]
    for action, *_ in saved:
        action.required = False
        # A subcommand's choices are its parsers: those stay.
        if not isinstance(action, argparse._SubParsersAction):
            action.type, action.choices = None, None
    for group, _ in groups:
        group.required = False
    try:
        yield
    finally:
        for action, required, type_, choices in saved:
            action.required, action.type, action.choices = required, type_, choices
        for group, required in groups:
            group.required = required


def _is_option(arg: str) -> bool:
    """An argument argparse takes for an option: a negative number is a value."""
    if len(arg) < 2 or not arg.startswith("-"):
        return False
    try:
        float(arg)
    except ValueError:
        return True
    return False


def stop_file_path(text: str) -> Path:
    """A --stop-file: the job deletes it at start (a stale request must not stop the new run),
    so it must be a stop file (empty, as the stop command makes it) or not exist yet."""
    path = Path(text).expanduser()
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} is a folder, not a stop file")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{path}: {path.parent} is not an existing folder")
    if path.is_file() and path.stat().st_size > 0:
        raise argparse.ArgumentTypeError(
            f"{path} is a file with contents, not a stop file: it would be deleted"
        )
    return path


def add_stop_file(parser: argparse.ArgumentParser) -> None:
    """A long-running job's --stop-file (stop_file_path)."""
    parser.add_argument(
        "--stop-file",
        type=stop_file_path,
        default=None,
        help="stop gracefully when this file appears (deleted at start if it is there)",
    )


def writable_ledger(
    parser: argparse.ArgumentParser, given: Path | None, default: Path
) -> tuple[Path, str | None]:
    """The ledger a generator will write, and why it cannot (None when it can). A --ledger the
    user gave that cannot be written is a bad argument (parser.error exits); the default one
    is the configuration's (the state folder), so the caller reports it as a run that cannot
    start."""
    ledger = given or default
    try:
        problem = ledger_problem(ledger)
    except OSError as err:
        problem = f"cannot check the ledger {ledger}: {err.strerror or err}"
    if problem and given:
        parser.error(problem)
    return ledger, problem


def replay_version(text: str) -> str:
    """A replay version's name (lakehouse.replay.plan.check_version_name's rule)."""
    from lakehouse.replay.plan import ReplayRequestError, check_version_name

    try:
        return check_version_name(text)
    except ReplayRequestError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
