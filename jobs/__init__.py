"""Spark entry points. Each module is a job (read -> transform -> write), run as
`python -m jobs.<name>` or submitted with spark-submit."""
