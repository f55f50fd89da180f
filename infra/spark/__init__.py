"""The Spark driver's files that are not Python: its log4j configuration, its class archive."""
