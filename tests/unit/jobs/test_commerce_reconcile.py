"""`python -m jobs.commerce_reconcile` on a local lakehouse the commerce processor wrote: nothing
to compare before its first batch, equal after two, and a state row the stream got wrong (a
write of its last batch) ends it with status 4 and the differing rows."""

from __future__ import annotations

import pytest
from delta.tables import DeltaTable

from jobs.contract import Exit, read_result
from lakehouse.commerce.outputs import CommerceOutputs
from lakehouse.commerce.processor import CommerceProcessor
from lakehouse.core.delta_io import COMMIT_METADATA, batch_mark, read_table
from lakehouse.core.paths import STATE_ENV
from tests.lakehouses import local_lakehouse
from tests.micro_batches import query_checkpoint
from tests.unit.commerce.test_processor import FIRST, SECOND, Log

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

LIVE = CommerceOutputs.live()


def lakehouse_env(tmp_path) -> dict[str, str]:
    return {
        "TRIBUTARY__STORAGE__ROOT": str(tmp_path / "lakehouse"),
        "TRIBUTARY__STORAGE__CHECKPOINTS": str(tmp_path / "checkpoints"),
        "TRIBUTARY_PROFILE": "local",
        STATE_ENV: str(tmp_path / "state"),
    }


def test_the_live_state_is_judged_against_the_batch_fold_as_of_its_last_batch(
    spark, run_job_here, tmp_path
) -> None:
    env = lakehouse_env(tmp_path)
    ran = run_job_here("jobs.commerce_reconcile", **env)
    assert ran.returncode == Exit.NOTHING_TO_DO
    assert "the commerce stream has completed no batch yet" in ran.stderr

    settings = local_lakehouse(tmp_path)
    log = Log(settings)
    processor = CommerceProcessor(settings, LIVE, str(query_checkpoint(tmp_path / "q", "c-1")))
    processor(log.batch(spark, FIRST), 0)
    processor(log.batch(spark, SECOND), 1)
    ran = run_job_here("jobs.commerce_reconcile", **env)
    assert ran.returncode == Exit.OK, ran.stderr
    result = read_result("commerce_reconcile", ran.stdout.splitlines())
    assert result is not None
    assert (result["batch_id"], result["orders"], result["differences"]) == (1, 3, 0)
    joins = run_job_here("jobs.joins_reconcile", "--join", "commerce", "--run-id", "c1", **env)
    assert joins.returncode == Exit.OK, joins.stderr
    outputs = read_result("joins_reconcile", joins.stdout.splitlines())["outputs"]  # type: ignore[index]
    assert outputs["order_state"]["compared"] == 3 and outputs["order_state"]["differing"] == 0

    # The stream's last batch got an order wrong.
    [app] = [r["app_id"] for r in read_table(spark, LIVE.progress, settings).limit(1).collect()]
    session = spark.newSession()
    session.conf.set(COMMIT_METADATA, batch_mark(app, 1))
    state = DeltaTable.forPath(session, LIVE.state.path(settings))
    state.update("order_id = 'o2'", {"status": "'delivered'"})
    ran = run_job_here("jobs.commerce_reconcile", **env)
    assert ran.returncode == Exit.CHECKS_FAILED
    result = read_result("commerce_reconcile", ran.stdout.splitlines())
    assert result is not None and result["differences"] == 2, "the wrong row and the right one"
    assert "'order_id': 'o2'" in ran.stderr
    joins = run_job_here("jobs.joins_reconcile", "--join", "commerce", "--run-id", "c1", **env)
    assert joins.returncode == Exit.CHECKS_FAILED
    assert "order_state: 1 of 3 orders differ" in joins.stderr and "order_id=o2" in joins.stderr
