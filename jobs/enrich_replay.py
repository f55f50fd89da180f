"""Enrich a replay version: its silver events joined as of their time with the shop's history
tables, by the enrichment stream's own code, then judged against its recompute.

    python -m jobs.enrich_replay v3

Reads `replay_<version>.events` (what `python -m jobs.replay` wrote) from its first version
(a second run continues from the checkpoint: what the version's events gained since) into
`replay_<version>.events_enriched` and `replay_<version>.revenue_by_segment`, with pins and
progress of its own, as the replay writer (one replay job at a time: a live replay must be
stopped first). Then compares them with the same events joined again at its last batch's
pins, as `python -m jobs.enrich_reconcile` does for the live stream, records the verdict in
`replay_<version>.enrichment_checks` (in kappa mode, serving reads the version's revenue up to
its last passed check) and prints `enrich_replay result: {...}`.

Exit status (jobs.contract): 0 enriched and equal; 1 cannot run (config, storage, no such
replay version, Spark, another replay running); 2 bad arguments; 3 the version holds no
event to enrich; 4 the version's enrichment differs from its recompute; 5 the query failed
(run it again to resume).
"""

from __future__ import annotations

import argparse
import sys

from jobs.arguments import say
from jobs.contract import Exit, exit_with, result_line
from jobs.parser import OneLineParser, replay_version
from jobs.stream_job import CANNOT_RUN
from lakehouse.core.config import get_settings
from lakehouse.core.paths import state_dir
from lakehouse.speed.stream import QueryFailedError

JOB = "enrich_replay"


def main(argv: list[str]) -> Exit:
    parser = OneLineParser(
        prog="python -m jobs.enrich_replay",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "version", type=replay_version, help="the replay version to enrich (e.g. v3)"
    )
    args = parser.parse_args(argv)
    from lakehouse.joins.outputs import EnrichmentOutputs
    from lakehouse.joins.reconcile import NothingToReconcile
    from lakehouse.joins.replay import enrich_version

    outputs = EnrichmentOutputs.replay(args.version)
    stop_file = state_dir() / "run" / f"{outputs.name}_enrichment.stop"
    try:
        judged = enrich_version(get_settings(), args.version, stop_file, say)
    except QueryFailedError as err:
        print(f"{JOB}: {outputs.name} enrichment failed: {err}", file=sys.stderr)
        return Exit.FAILED
    except NothingToReconcile as err:
        print(f"{JOB}: {err}: {outputs.events.name} holds no event yet", file=sys.stderr)
        return Exit.NOTHING_TO_DO
    except CANNOT_RUN as err:
        print(f"{JOB}: {err}", file=sys.stderr)
        return Exit.CANNOT_RUN
    result = {
        "version": args.version,
        "batch_id": judged.batch_id,
        "equal": judged.equal,
        "events": {"compared": judged.events.compared, "differing": judged.events.differing},
        "windows": {"compared": judged.windows.compared, "differing": judged.windows.differing},
        "failures": [*judged.events.examples, *judged.windows.examples],
    }
    say(result_line(JOB, result))
    if not judged.equal:
        print("\n".join(result["failures"]), file=sys.stderr)
        return Exit.CHECKS_FAILED
    return Exit.OK


if __name__ == "__main__":
    exit_with(main(sys.argv[1:]))
