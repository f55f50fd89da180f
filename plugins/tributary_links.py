"""The "Results" button of every task in the Airflow UI: the URL a task pushed as its
tributary_results XCom (dags/support/results.py), read by the API server when the UI asks for
the task's extra links. A task that pushed none shows no button."""

from __future__ import annotations

from typing import ClassVar

from airflow.plugins_manager import AirflowPlugin
from airflow.serialization.definitions.operatorlink import XComOperatorLink

# dags.support.results.RESULTS_KEY: the plugin does not import the DAGs' package.
RESULTS_KEY = "tributary_results"


class TributaryLinksPlugin(AirflowPlugin):
    name = "tributary_links"
    global_operator_extra_links: ClassVar = [XComOperatorLink(name="Results", xcom_key=RESULTS_KEY)]
