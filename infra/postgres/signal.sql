-- The signalling table of the shop's Debezium connector (signal.data.collection,
-- lakehouse/cdc/connector.py): a row with type `execute-snapshot` asks the running connector
-- for an incremental snapshot of the tables its data names (lakehouse.cdc.capture). Debezium
-- wants exactly these three columns, in this order. Applied after shop.sql; idempotent.
CREATE TABLE IF NOT EXISTS debezium_signal (
    id   text PRIMARY KEY,
    type text NOT NULL,
    data text
);
