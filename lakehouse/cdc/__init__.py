"""Change data capture: the shop database's changes, read from its write-ahead log by Debezium
on Kafka Connect into one compacted changelog topic per table, and the tables built from them."""
