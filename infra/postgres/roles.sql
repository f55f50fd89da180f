-- The shop database and its login role, made by the cluster's superuser at each start
-- (infra/services/postgres.py, through psql; idempotent). The role owns the tables, so
-- Debezium (which logs in as it) can create the publication it captures them with, and has
-- REPLICATION for the replication slot. The password comes from the environment, never a file.
\set ON_ERROR_STOP on
\getenv password TRIBUTARY_POSTGRES_PASSWORD
SELECT format('CREATE ROLE %I LOGIN REPLICATION', :'user')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'user')
\gexec
ALTER ROLE :"user" WITH LOGIN REPLICATION PASSWORD :'password';
SELECT format('CREATE DATABASE %I OWNER %I', :'database', :'user')
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'database')
\gexec
