"""Send a realistic click stream (anomalies included) to the events topic, from the UI."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from airflow.sdk import Param, dag, get_current_context, task

log = logging.getLogger("tributary.dags.generate_events")

DOC = """
### Generate events

Produces click-stream events to the Kafka topic the speed layer reads, with the generator's
mix of anomalies (malformed JSON, wrong types, missing fields, duplicates, late, out-of-order,
far-future and oversized records), and writes a **ledger** of every record and what the
pipeline must do with it to `<state>/ledgers/`. Same tool as `make generate ARGS="..."`
(`python -m jobs.generate --help`).

Without *realtime*, records go out as fast as Kafka takes them, with event times spaced at
*rate* events/s ending now; with it, sending is paced at *rate* events/s of wall-clock time.
"""


@dag(
    dag_id="generate_events",
    schedule=None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    tags=["tributary", "tools"],
    description="Produce a realistic event stream with anomalies, and its ledger",
    doc_md=DOC,
    params={
        "count": Param(
            1000,
            type="integer",
            minimum=1,
            maximum=10_000_000,
            title="Events",
            description="How many records to send",
        ),
        "rate": Param(
            100.0,
            type="number",
            exclusiveMinimum=0,
            title="Rate (events/s)",
            description="Spacing of event times, and the sending pace when realtime",
        ),
        "realtime": Param(
            False,
            type="boolean",
            title="Realtime",
            description="Pace the sending at the rate, in wall-clock time",
        ),
        "anomalies": Param(
            "default",
            type="string",
            enum=["none", "default", "all"],
            title="Anomalies",
            description="How many bad records to mix in",
        ),
        "seed": Param(
            None,
            type=["null", "integer"],
            title="Seed",
            description="Empty: a new seed, so the events are new ones",
        ),
    },
)
def generate_events() -> None:
    @task(execution_timeout=timedelta(hours=6))
    def produce() -> None:
        from dags.support.job_runner import run_job
        from dags.support.run_params import checked_params
        from jobs.contract import Exit

        params = checked_params(get_current_context())
        count, rate = int(params["count"]), float(params["rate"])
        argv = ["--count", str(count), "--rate", str(rate), "--anomalies", params["anomalies"]]
        if params["realtime"]:
            argv.append("--realtime")
        else:
            # Event times end now: start as far back as the events span.
            start = datetime.now(UTC) - timedelta(seconds=count / rate)
            argv += ["--start", start.isoformat()]
        if params["seed"] is not None:
            argv += ["--seed", str(params["seed"])]
        log.info("python -m jobs.generate %s", " ".join(argv))
        outcome = run_job("jobs.generate", argv, on_line=log.info)
        if outcome.returncode == Exit.BAD_REQUEST:
            raise outcome.refusal("no events were produced")
        if outcome.returncode != Exit.OK:
            raise outcome.failure("jobs.generate")

    produce()


generate_events()
