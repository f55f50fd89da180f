"""How a task ends with a reason: one ERROR line that is the reason, no stack trace.

Airflow's task runner logs any exception a task raises with its traceback (about a dozen
frames of its own code), except SystemExit, which it logs as one ERROR line, "Task exited",
with the exit code beside it. So a task that knows why it stops raises one of these, whose
exit code is the reason: a person filtering the log to errors reads it, and nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from airflow.sdk.definitions.retry_policy import ExceptionRetryPolicy


class TaskFailed(SystemExit):
    """The task failed for `reason` (a job that crashed, a check that broke). Retried as its
    DAG says: the cause may pass."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


class Refused(TaskFailed):
    """The task refused what it was asked (bad parameters, a version that does not exist, a
    gate that failed): failed at once, never retried, since a retry would be refused the same
    way."""


def retry_policy() -> ExceptionRetryPolicy:
    """Every DAG's `retry_policy` (in its default_args): a refusal is not retried, anything
    else follows the task's `retries`."""
    from airflow.sdk.definitions.retry_policy import ExceptionRetryPolicy, RetryAction, RetryRule

    return ExceptionRetryPolicy(
        rules=[
            RetryRule(
                exception=f"{Refused.__module__}.{Refused.__qualname__}",
                action=RetryAction.FAIL,
                reason="refused: a retry would be refused the same way",
            )
        ]
    )
