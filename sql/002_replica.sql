-- Replica bookkeeping: the schema's version, and snapshot PNGs stored in the row on plain
-- PostgreSQL (Supabase keeps them in a Storage bucket and leaves `png` null).
-- Idempotent: the replicator applies every migration on start (PostgreSQL) and refuses a
-- database whose newest version is not the one the code knows (palletizer/telemetry/replica).

BEGIN;

CREATE TABLE IF NOT EXISTS schema_migrations (
    version int PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE snapshots ADD COLUMN IF NOT EXISTS png bytea;  -- PNG bytes (plain PostgreSQL)

INSERT INTO schema_migrations (version, name)
VALUES (1, '001_schema'), (2, '002_replica')
ON CONFLICT (version) DO NOTHING;

-- Row-level security as for the other tables: anon reads, only the service role writes.
ALTER TABLE schema_migrations ENABLE ROW LEVEL SECURITY;
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'anon')
       AND NOT EXISTS (SELECT 1 FROM pg_policies
                       WHERE tablename = 'schema_migrations' AND policyname = 'lectura_publica')
    THEN
        CREATE POLICY lectura_publica ON schema_migrations FOR SELECT TO anon, authenticated
            USING (true);
    END IF;
END
$$;

COMMIT;
