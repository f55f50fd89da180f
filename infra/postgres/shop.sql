-- The shop schema change data capture reads: the dimensions the click events refer to
-- (users u0001.., products p001.., lakehouse/generator/clickstream.py) and the orders.
-- Applied by the shop's own role at each start of the embedded PostgreSQL; idempotent.
-- updated_at is the business clock: history tables are valid from/to it.
-- REPLICA IDENTITY FULL: an update or a delete carries the whole old row (Debezium's
-- `before`), not only the key.
CREATE TABLE IF NOT EXISTS users (
    user_id    text PRIMARY KEY,
    segment    text NOT NULL,
    country    text NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS products (
    product_id text PRIMARY KEY,
    name       text NOT NULL,
    category   text NOT NULL,
    price      numeric(10, 2) NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS orders (
    order_id   text PRIMARY KEY,
    user_id    text NOT NULL,
    status     text NOT NULL,
    total      numeric(12, 2) NOT NULL,
    updated_at timestamptz NOT NULL
);
ALTER TABLE users REPLICA IDENTITY FULL;
ALTER TABLE products REPLICA IDENTITY FULL;
ALTER TABLE orders REPLICA IDENTITY FULL;
