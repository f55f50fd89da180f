"""Run a suite (lakehouse.quality.suites) on a static DataFrame with Great Expectations.

The DataFrame is a Delta snapshot or one micro-batch, never a streaming DataFrame: GX counts
and samples, which a stream cannot do. Each run uses an ephemeral GX context (nothing to keep
in sync on disk) wired the GX 1.x way: Spark data source -> dataframe asset -> whole-dataframe
batch definition -> validation definition -> checkpoint, whose UpdateDataDocsAction renders
Data Docs into the caller's folder. The validation results of earlier runs are kept as JSON
beside those docs, so the index lists every run, not only the last one.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.core.paths import dq_dir
from lakehouse.quality.suites import (
    Action,
    Check,
    Suite,
    unexpected_rows,
)

if TYPE_CHECKING:
    from great_expectations.core import ExpectationValidationResult
    from great_expectations.data_context import EphemeralDataContext
    from great_expectations.datasource.fluent import SparkDatasource
    from great_expectations.expectations import UnexpectedRowsExpectation
    from pyspark.sql import DataFrame


log = logging.getLogger(__name__)

SITE = "tributary"
RESULTS_FOLDER = "_results"  # inside the docs folder: docs and the runs they list move together
EXAMPLES = 5
INDEX_LIMIT = 500  # the newest validations listed in the Data Docs index


class Verdict(StrEnum):
    PASSED = "passed"
    WARNED = "warned"  # a WARN check broke, or rows were routed to quarantine
    FAILED = "failed"  # a FAIL check broke: the run must fail


class DataQualityError(Exception):
    """A FAIL check broke; the message lists which, with counts and examples."""


@dataclass(frozen=True)
class CheckResult:
    check: str
    expectation: str  # the GX expectation type, e.g. expect_column_values_to_be_unique
    action: Action
    success: bool
    unexpected_count: int | None  # None for checks that count nothing (types)
    examples: tuple[Any, ...]  # a few unexpected values (or rows), for the log

    def describe(self) -> str:
        count = "" if self.unexpected_count is None else f" ({self.unexpected_count} rows)"
        shown = f" e.g. {list(self.examples)}" if self.examples else ""
        state = "ok" if self.success else f"BROKEN -> {self.action.value}"
        return f"{self.check}: {state}{'' if self.success else count + shown}"


@dataclass(frozen=True)
class SuiteResult:
    suite: Suite
    checks: tuple[CheckResult, ...]
    data_docs: Path | None = None  # the site's index.html
    data_docs_page: Path | None = None  # this run's validation page
    data_docs_examples_page: Path | None = None  # the broken checks again, with examples
    seconds: dict[str, float] = field(default_factory=dict)  # "counts", "examples"

    def check_result(self, name: str) -> CheckResult:
        return next(c for c in self.checks if c.check == name)

    def broken(self, action: Action | None = None) -> tuple[CheckResult, ...]:
        return tuple(
            c for c in self.checks if not c.success and (action is None or c.action is action)
        )

    @property
    def verdict(self) -> Verdict:
        if self.broken(Action.FAIL):
            return Verdict.FAILED
        return Verdict.WARNED if self.broken() else Verdict.PASSED

    def summary(self) -> str:
        took = f" in {sum(self.seconds.values()):.1f} s" if self.seconds else ""
        lines = [f"{self.suite.name}: {self.verdict.value}{took}"]
        lines += [f"  {c.describe()}" for c in self.broken()]
        for page in (self.data_docs_page, self.data_docs_examples_page):
            if page is not None:
                lines.append(f"  Data Docs: {page.as_uri()}")
        return "\n".join(lines)

    def raise_if_failed(self) -> None:
        if self.verdict is Verdict.FAILED:
            raise DataQualityError(self.summary())


def _quiet_gx() -> None:
    # Read when GX starts its analytics client; setdefault lets a user opt back in.
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    logging.getLogger("great_expectations").setLevel(logging.WARNING)


def _context(docs_dir: Path | None) -> EphemeralDataContext:
    import great_expectations as gx
    from great_expectations.data_context.types.base import (
        DataContextConfig,
        InMemoryStoreBackendDefaults,
        ProgressBarsConfig,
    )

    config = DataContextConfig(
        store_backend_defaults=InMemoryStoreBackendDefaults(init_temp_docs_sites=False),
        analytics_enabled=False,
        progress_bars=ProgressBarsConfig(globally=False, metric_calculations=False),
    )
    if docs_dir is not None:
        config.stores[config.validation_results_store_name] = {
            "class_name": "ValidationResultsStore",
            "store_backend": {
                "class_name": "TupleFilesystemStoreBackend",
                "base_directory": str(docs_dir / RESULTS_FOLDER),
            },
        }
        config.data_docs_sites = {
            SITE: {
                "class_name": "SiteBuilder",
                "store_backend": {
                    "class_name": "TupleFilesystemStoreBackend",
                    "base_directory": str(docs_dir),
                },
                # The index loads every run it lists: keep its cost (and length) bounded.
                "site_index_builder": {
                    "class_name": "DefaultSiteIndexBuilder",
                    "validation_results_limit": INDEX_LIMIT,
                },
            }
        }
    return gx.get_context(mode="ephemeral", project_config=config)


def _query_examples(
    df: DataFrame, expectation: UnexpectedRowsExpectation, limit: int
) -> tuple[Any, ...]:
    # GX only returns an UnexpectedRowsExpectation's rows with the COMPLETE result format,
    # which would also collect every unexpected value of every other check.
    view = f"dq_{uuid.uuid4().hex}"
    df.createOrReplaceTempView(view)
    try:
        query = str(expectation.unexpected_rows_query).format(batch=view)
        return tuple(r.asDict() for r in df.sparkSession.sql(query).limit(limit).collect())
    finally:
        df.sparkSession.catalog.dropTempView(view)


def _check_name(result: ExpectationValidationResult) -> str:
    config = result.expectation_config
    assert config is not None and config.meta is not None, "suites tag every expectation"
    return str(config.meta["check"])


def _check_result(
    df: DataFrame,
    suite: Suite,
    result: ExpectationValidationResult,
    detail: ExpectationValidationResult | None,
    limit: int,
) -> CheckResult:
    from great_expectations.expectations import UnexpectedRowsExpectation

    check = suite.check(_check_name(result))
    details = result.result or {}
    count = details.get("unexpected_count")
    examples = tuple(((detail and detail.result) or {}).get("partial_unexpected_list") or [])
    if isinstance(check.expectation, UnexpectedRowsExpectation):
        count = details.get("observed_value")  # how it reports its row count
        if not result.success and limit:
            examples = _query_examples(df, check.expectation, limit)
    return CheckResult(
        check=check.name,
        expectation=check.expectation.expectation_type,
        action=check.action,
        success=bool(result.success),
        unexpected_count=None if count is None else int(count),
        examples=examples[:limit],
    )


@dataclass
class _Run:
    """One GX context for one validation: a data source, then per suite an asset, a batch
    definition, a validation definition and a checkpoint (the GX 1.x chain)."""

    context: EphemeralDataContext
    source: SparkDatasource
    docs: Path | None
    run_name: str | None

    def __call__(
        self, df: DataFrame, suite: Suite, result_format: dict[str, Any]
    ) -> tuple[list[ExpectationValidationResult], Path | None]:
        import great_expectations as gx
        from great_expectations.checkpoint import UpdateDataDocsAction
        from great_expectations.core.run_identifier import RunIdentifier

        batch = self.source.add_dataframe_asset(suite.name).add_batch_definition_whole_dataframe(
            "snapshot"
        )
        definition = self.context.validation_definitions.add(
            gx.ValidationDefinition(
                name=suite.name,
                data=batch,
                suite=self.context.suites.add(suite.expectation_suite()),
            )
        )
        checkpoint = self.context.checkpoints.add(
            gx.Checkpoint(
                name=suite.name,
                validation_definitions=[definition],
                actions=[UpdateDataDocsAction(name="docs", site_names=[SITE])] if self.docs else [],
                result_format=result_format,
            )
        )
        run = checkpoint.run(
            batch_parameters={"dataframe": df},
            run_id=RunIdentifier(run_name=self.run_name, run_time=datetime.now(UTC)),
        )
        [(identifier, validation)] = run.run_results.items()
        page = None
        if self.docs is not None:
            [site] = self.context.get_docs_sites_urls(
                resource_identifier=identifier, site_name=SITE
            )
            page = Path(str(site["site_url"]).removeprefix("file://"))
        return list(validation.results), page


# Examples cost a full scan per expectation even when nothing is wrong (GX filters and
# limits), which more than doubled the suite's time: first count everything, then fetch
# examples only for the checks that broke.
COUNTS_ONLY = {"result_format": "BASIC", "partial_unexpected_count": 0}


def validate_dataframe(
    df: DataFrame,
    suite: Suite,
    *,
    docs_dir: str | Path | None = None,
    run_name: str | None = None,
    examples: int = EXAMPLES,
    cache: bool = False,
) -> SuiteResult:
    """Validate a static DataFrame (a Delta snapshot, a micro-batch) against `suite`.

    `docs_dir`: build Data Docs there (e.g. default_docs_dir()) and log the page's path.
    `run_name`: names the run in Data Docs; pass the Airflow run id or data interval. (The
    run's time in Data Docs is the wall clock: a label, never a data decision.)
    `examples`: how many unexpected values to keep per broken check (a second, smaller
    validation of the broken checks only, with its own Data Docs page).
    `cache`: persist `df` while GX runs its few Spark jobs. Off by default: on a Delta
    snapshot each job reads only the columns it needs, which beats caching every column
    first. Cache (or pass True) when `df` is costly to recompute.
    """
    from pyspark import StorageLevel

    if df.isStreaming:
        raise ValueError(
            "validate a Delta snapshot or a micro-batch (inside foreachBatch), not a stream"
        )
    _quiet_gx()
    docs = Path(docs_dir).resolve() if docs_dir is not None else None
    context = _context(docs)
    # persist=False: GX would cache the DataFrame, and never release it.
    run = _Run(context, context.data_sources.add_spark("tributary", persist=False), docs, run_name)
    cached = cache and not df.is_cached
    if cached:
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
    began = time.monotonic()
    try:
        counted, page = run(df, suite, COUNTS_ONLY)
        seconds = {"counts": round(time.monotonic() - began, 2)}
        broken = {_check_name(r) for r in counted if not r.success}
        detailed: dict[str, ExpectationValidationResult] = {}
        examples_page = None
        if broken and examples:
            failures = Suite(
                f"{suite.name}.broken", tuple(c for c in suite.checks if c.name in broken)
            )
            found, examples_page = run(
                df, failures, {"result_format": "BASIC", "partial_unexpected_count": examples}
            )
            detailed = {_check_name(r): r for r in found}
        checks = [
            _check_result(df, suite, r, detailed.get(_check_name(r)), examples) for r in counted
        ]
        if broken and examples:
            seconds["examples"] = round(time.monotonic() - began - seconds["counts"], 2)
    finally:
        if cached:
            df.unpersist()
    order = {c.name: i for i, c in enumerate(suite.checks)}
    result = SuiteResult(
        suite,
        tuple(sorted(checks, key=lambda c: order[c.check])),
        data_docs=docs / "index.html" if docs else None,
        data_docs_page=page,
        data_docs_examples_page=examples_page,
        seconds=seconds,
    )
    for shown in (page, examples_page):
        if shown is not None:
            log.info("Data Docs for %s: %s", suite.name, shown)
    log.info("%s", result.summary())
    return result


def default_docs_dir() -> Path:
    """Where Data Docs go unless the caller says otherwise: {state}/dq/data_docs."""
    return dq_dir() / "data_docs"


def _routed(result: SuiteResult) -> list[Check]:
    return [
        result.suite.check(c.check)
        for c in result.broken(Action.QUARANTINE)
        if c.unexpected_count != 0
    ]


def quarantine_rows(df: DataFrame, result: SuiteResult) -> DataFrame:
    """The rows of `df` that broke a QUARANTINE check of `result`, with `reasons` (one
    "dq:<check>" per broken check) and `reason` (joined by "; ", like bronze.quarantine).

    On a micro-batch, these go to bronze.quarantine and `kept_rows` to silver. On a snapshot
    they are a report: taking rows out of a table is its one writer's job (invariant 5)."""
    from pyspark.sql import functions as F

    routed = _routed(result)
    if not routed:
        return df.limit(0).withColumns(
            {"reasons": F.array().cast("array<string>"), "reason": F.lit("")}
        )
    reasons = F.filter(
        F.array(*(F.when(F.expr(unexpected_rows(c.expectation)), F.lit(c.reason)) for c in routed)),
        lambda r: r.isNotNull(),
    )
    return (
        df.withColumn("reasons", reasons)
        .where(F.size("reasons") > 0)
        .withColumn("reason", F.array_join("reasons", "; "))
    )


def kept_rows(df: DataFrame, result: SuiteResult) -> DataFrame:
    """The rows of `df` that no QUARANTINE check refused: what stays once the rest is routed."""
    from pyspark.sql import functions as F

    routed = _routed(result)
    if not routed:
        return df
    return df.where(~F.expr(" OR ".join(f"({unexpected_rows(c.expectation)})" for c in routed)))
