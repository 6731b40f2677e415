-- Sinks: a tenant's topics applied to a table of a PostgreSQL database exactly once. `spec`
-- is the definition as JSON (topics, table, mode, dead-letter topic); `target_sealed` the
-- target database's URL, encrypted with the control plane's sink key and bound to the
-- sink's id, never returned by the API. `state` is `running` or `paused`.
CREATE TABLE sinks (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    spec TEXT NOT NULL,
    target_sealed TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('running', 'paused')),
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (tenant_id, name)
);

-- The control-plane replicas that run sink workers, by heartbeat: the live ones share every
-- running sink's partitions among them.
CREATE TABLE sink_workers (
    worker TEXT PRIMARY KEY,
    heartbeat_at BIGINT NOT NULL
);

-- What the worker of each partition of a sink last reported.
CREATE TABLE sink_partitions (
    sink_id TEXT NOT NULL REFERENCES sinks (id) ON DELETE CASCADE,
    topic TEXT NOT NULL,
    partition BIGINT NOT NULL,
    worker TEXT NOT NULL,
    next_offset BIGINT,
    log_end_offset BIGINT,
    rows_applied BIGINT NOT NULL,
    rows_per_sec REAL NOT NULL,
    dead_lettered BIGINT NOT NULL,
    last_error TEXT,
    reported_at BIGINT NOT NULL,
    PRIMARY KEY (sink_id, topic, partition)
);
