"""The commerce stream: order lifecycle events and payments from Kafka into bronze, silver and
the order state they fold to (docs/joins.md, "Order events and payments")."""
