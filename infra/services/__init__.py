"""The embedded services (Kafka, MinIO, Airflow): `python -m infra.services up|down|status`."""
