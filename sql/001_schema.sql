-- Platform telemetry schema (docs/telemetry.md §8.1-8.2): runs, episodes, events, placements,
-- pallet_states, snapshots. Columns are SI (m, rad, s, kg); event payloads are mm and degrees.
-- The closed vocabularies are CHECK constraints: a wrong value fails with SQLSTATE 23514.
-- Loads on plain PostgreSQL >= 13 (gen_random_uuid is built in) and on Supabase; the Supabase
-- parts (roles anon/authenticated, the realtime publication) are applied only where they exist.

BEGIN;

CREATE TABLE IF NOT EXISTS runs (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    started_at timestamptz NOT NULL DEFAULT now(),
    ended_at timestamptz,                       -- null while open or after a crash
    task text NOT NULL CONSTRAINT runs_task_check CHECK (task IN (
        'table', 'conveyor', 'truck', 'induction', 'palletizing', 'paletizado-guionizado')),
    level int NOT NULL,                         -- level id, 11..34
    git_sha text NOT NULL DEFAULT '',
    oracle boolean NOT NULL DEFAULT false,      -- any stub in use
    motion_speed real NOT NULL DEFAULT 1.0,
    label text,
    config jsonb NOT NULL DEFAULT '{}'::jsonb,  -- bench description; pallet_size_m required
    n_episodes int NOT NULL DEFAULT 0,          -- requested, not actual
    description text,
    synthetic boolean NOT NULL DEFAULT false
);

CREATE TABLE IF NOT EXISTS episodes (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    run_id uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    seed int NOT NULL,
    task text NOT NULL CONSTRAINT episodes_task_check CHECK (task IN (
        'table', 'conveyor', 'truck', 'induction', 'palletizing', 'paletizado-guionizado')),
    level int NOT NULL,
    status text NOT NULL DEFAULT 'running'
        CONSTRAINT episodes_status_check CHECK (status IN ('running', 'success', 'failure')),
    started_at timestamptz NOT NULL DEFAULT now(),
    ended_at timestamptz,
    duration_s real,                            -- [s] simulated
    n_objects int NOT NULL DEFAULT 0,
    n_placed int NOT NULL DEFAULT 0,
    score real,                                 -- = metrics.score
    failure text CONSTRAINT episodes_failure_check CHECK (failure IN (
        'no_detection', 'ik_unreachable', 'collision', 'grasp_slip', 'wrong_placement',
        'timeout', 'stack_collapse', 'overhang_violation', 'place_inaccurate')),
    metrics jsonb NOT NULL DEFAULT '{}'::jsonb,
    UNIQUE (run_id, seed)
);

CREATE TABLE IF NOT EXISTS events (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    episode_id uuid NOT NULL REFERENCES episodes (id) ON DELETE CASCADE,
    ts real NOT NULL,                           -- [s] since episode start, sim clock
    seq int NOT NULL,                           -- per-episode counter
    kind text NOT NULL CONSTRAINT events_kind_check CHECK (kind IN (
        'perceive', 'plan', 'pick', 'place', 'settle', 'fail')),
    package_id text,                            -- null for perceive and fail
    payload jsonb NOT NULL DEFAULT '{}'::jsonb, -- mm and degrees
    UNIQUE (episode_id, seq)
);

CREATE TABLE IF NOT EXISTS placements (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    episode_id uuid NOT NULL REFERENCES episodes (id) ON DELETE CASCADE,
    seq int NOT NULL,                           -- attempt index within the episode
    package_id text NOT NULL,
    package_type text NOT NULL,
    mass_kg real,                               -- [kg]
    dims_m real[],                              -- [m] L, W, H
    layer int,                                  -- planned layer
    planned_pose jsonb,                         -- {x, y, z, yaw} [m, rad], pallet frame
    actual_pose jsonb,                          -- {x, y, z, yaw} [m, rad], pallet frame
    error_xy_m real,                            -- [m]
    error_yaw_rad real,                         -- [rad]
    support_ratio real,                         -- [0..1] on the deck or on tops at its bottom
    support_ratio_layer real,                   -- [0..1] reference rule: previous planned layer
    overhang_m real,                            -- [m]
    placed boolean NOT NULL DEFAULT false,
    UNIQUE (episode_id, seq)
);

CREATE TABLE IF NOT EXISTS pallet_states (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    episode_id uuid NOT NULL REFERENCES episodes (id) ON DELETE CASCADE,
    after_seq int NOT NULL,                     -- state after this attempt
    mass_kg real NOT NULL,                      -- [kg]
    cog_x real NOT NULL,                        -- [m] pallet frame
    cog_y real NOT NULL,                        -- [m]
    cog_z real NOT NULL,                        -- [m] above the deck
    stability_margin_m real,                    -- [m] negative tips
    fill_ratio real,                            -- [0..1]
    settle_drift_m real,                        -- [m]
    UNIQUE (episode_id, after_seq)
);

CREATE TABLE IF NOT EXISTS snapshots (
    id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    episode_id uuid NOT NULL REFERENCES episodes (id) ON DELETE CASCADE,
    after_seq int NOT NULL,                     -- matches pallet_states.after_seq
    view text NOT NULL CONSTRAINT snapshots_view_check CHECK (view IN (
        'top', 'side', 'iso', 'camera')),
    url text NOT NULL,                          -- public Storage URL of the PNG
    width int,
    height int,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (episode_id, after_seq, view)
);

CREATE INDEX IF NOT EXISTS runs_started_at_idx ON runs (started_at DESC);
CREATE INDEX IF NOT EXISTS runs_task_level_oracle_idx ON runs (task, level, oracle);
CREATE INDEX IF NOT EXISTS episodes_run_seed_idx ON episodes (run_id, seed);
CREATE INDEX IF NOT EXISTS episodes_failure_idx ON episodes (failure) WHERE failure IS NOT NULL;
CREATE INDEX IF NOT EXISTS episodes_running_idx ON episodes (started_at DESC)
    WHERE status = 'running';
CREATE INDEX IF NOT EXISTS placements_episode_seq_idx ON placements (episode_id, seq);
CREATE INDEX IF NOT EXISTS pallet_states_episode_seq_idx ON pallet_states (episode_id, after_seq);
CREATE INDEX IF NOT EXISTS events_episode_seq_idx ON events (episode_id, seq);
CREATE INDEX IF NOT EXISTS snapshots_episode_seq_idx ON snapshots (episode_id, after_seq);

-- Row-level security: everyone may read; writes need the service key (which bypasses RLS).
ALTER TABLE runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE episodes ENABLE ROW LEVEL SECURITY;
ALTER TABLE events ENABLE ROW LEVEL SECURITY;
ALTER TABLE placements ENABLE ROW LEVEL SECURITY;
ALTER TABLE pallet_states ENABLE ROW LEVEL SECURITY;
ALTER TABLE snapshots ENABLE ROW LEVEL SECURITY;

DO $$
DECLARE
    t text;
BEGIN
    IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'anon')
       AND EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'authenticated') THEN
        FOREACH t IN ARRAY ARRAY['runs', 'episodes', 'events', 'placements', 'pallet_states',
                                 'snapshots'] LOOP
            IF NOT EXISTS (SELECT 1 FROM pg_policies
                           WHERE tablename = t AND policyname = 'lectura_publica') THEN
                EXECUTE format('CREATE POLICY lectura_publica ON %I FOR SELECT '
                               'TO anon, authenticated USING (true)', t);
            END IF;
        END LOOP;
    END IF;
    IF EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'supabase_realtime') THEN
        FOREACH t IN ARRAY ARRAY['events', 'pallet_states', 'episodes', 'snapshots'] LOOP
            IF NOT EXISTS (SELECT 1 FROM pg_publication_tables
                           WHERE pubname = 'supabase_realtime' AND tablename = t) THEN
                EXECUTE format('ALTER PUBLICATION supabase_realtime ADD TABLE %I', t);
            END IF;
        END LOOP;
    END IF;
END
$$;

COMMIT;
