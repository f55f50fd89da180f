"""The CDC reconciliation's comparison (lakehouse.cdc.reconcile): rows of one kind compared by
their identity, each difference counted once and described by key, side and column; and the
captured tables of a lakehouse built in code found equal, or differing where the stream's
table was spoilt. The stream's own batches are judged in tests/unit/cdc/test_changelog.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse.cdc.reconcile import NothingToReconcile, compare_rows, reconcile_changelog
from lakehouse.core.frames import rows_frame
from tests.captured_lakehouse import (
    BATCH_ID,
    begin_batch,
    build_users,
    drop_version,
    spoil_segment,
)
from tests.lakehouses import copied, local_lakehouse, moved_to

pytestmark = pytest.mark.slow  # make test-fast leaves it out (docs/testing.md)

ROWS = "user_id string, segment string, lsn bigint"


def test_equal_rows_are_all_compared_and_none_differs(spark) -> None:
    rows = [("u1", "vip", 10), ("u2", "new", 20)]
    same = compare_rows(
        "current", rows_frame(spark, rows, ROWS), rows_frame(spark, rows, ROWS), ["user_id"]
    )
    assert (same.compared, same.differing, same.equal, same.examples) == (2, 0, 2, [])


def test_each_differing_key_counts_once_and_says_how_it_differs(spark) -> None:
    recomputed = rows_frame(
        spark, [("u1", "vip", 10), ("u2", "new", 20), ("u3", "new", 30), ("u5", "new", 50)], ROWS
    )
    stream = rows_frame(
        spark,
        [("u1", "lost", 10), ("u2", "new", 20), ("u4", "new", 40)]
        + [("u5", "new", 50)] * 2,  # u5 twice
        ROWS,
    )
    found = compare_rows("current", recomputed, stream, ["user_id"])
    assert (found.compared, found.differing, found.equal) == (5, 4, 1)
    assert found.examples == [
        "user_id=u1: segment vip in the recompute, lost in the stream",
        "user_id=u3: only in the recompute",
        "user_id=u4: only in the stream",
        "user_id=u5: 1 row(s) in the recompute, 2 in the stream",
    ]


@pytest.fixture(scope="module")
def users_folder(spark, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("captured")
    build_users(spark, folder)
    return folder


def test_a_lakehouse_whose_stream_applied_every_change_is_equal(spark, users_folder) -> None:
    found = reconcile_changelog(spark, local_lakehouse(users_folder), ["users"])
    [users] = found.tables
    assert found.equal and found.batch_id == BATCH_ID
    assert (users.current.compared, users.current.equal) == (2, 2)
    assert (users.history.compared, users.history.equal) == (3, 3)


def test_a_spoilt_current_row_and_a_lost_version_are_found_in_their_kind(
    spark, users_folder, tmp_path
) -> None:
    settings = moved_to(local_lakehouse(users_folder), copied(users_folder, tmp_path / "copy"))
    spoil_segment(spark, settings, "u1", "lost")
    drop_version(spark, settings, "u1", 10)
    [users, products, _] = reconcile_changelog(spark, settings).tables
    assert not users.equal
    assert (users.current.differing, users.current.examples) == (
        1,
        ["user_id=u1: segment vip in the recompute, lost in the stream"],
    )
    assert (users.history.compared, users.history.differing) == (3, 1)
    assert users.history.examples == ["user_id=u1 lsn=10: only in the recompute"]
    assert products.equal and products.note == "no changes captured yet"


def test_a_key_with_a_change_beyond_the_last_batch_is_left_out_and_counted(
    spark, users_folder, tmp_path
) -> None:
    settings = moved_to(local_lakehouse(users_folder), copied(users_folder, tmp_path / "copy"))
    begin_batch(spark, settings, "u2", "vip")
    [users] = reconcile_changelog(spark, settings, ["users"]).tables
    assert users.equal and users.in_flight_keys == 1
    assert (users.current.compared, users.history.compared) == (1, 2), "u1 alone"


def test_before_any_batch_there_is_nothing_to_reconcile(spark, tmp_path) -> None:
    with pytest.raises(NothingToReconcile, match="no batch yet"):
        reconcile_changelog(spark, local_lakehouse(tmp_path))
