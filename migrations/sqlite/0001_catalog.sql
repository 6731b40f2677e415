-- The catalog: tenants and who acts for them, what they may do, and where their topics live.
-- Identifiers are UUIDs as text, times milliseconds since the Unix epoch and every integer
-- 64-bit, so the PostgreSQL and SQLite schemas hold and return the same values.

CREATE TABLE tenants (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);

CREATE TABLE principals (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('user', 'service_account')),
    name TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (tenant_id, name)
);

CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    principal_id TEXT NOT NULL REFERENCES principals (id) ON DELETE CASCADE,
    secret_hash TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER,
    last_used_at INTEGER
);

CREATE TABLE acls (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    principal TEXT NOT NULL,
    host TEXT NOT NULL,
    resource_type TEXT NOT NULL,
    resource_name TEXT NOT NULL,
    pattern_type TEXT NOT NULL,
    operation TEXT NOT NULL,
    permission TEXT NOT NULL,
    UNIQUE (tenant_id, principal, host, resource_type, resource_name, pattern_type, operation, permission)
);

-- principal_id '' is the tenant-wide quota.
CREATE TABLE quotas (
    tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    principal_id TEXT NOT NULL,
    produce_bytes_per_sec INTEGER,
    fetch_bytes_per_sec INTEGER,
    requests_per_sec INTEGER,
    partitions INTEGER,
    PRIMARY KEY (tenant_id, principal_id)
);

CREATE TABLE topics (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    partitions INTEGER NOT NULL CHECK (partitions > 0),
    replication_factor INTEGER NOT NULL CHECK (replication_factor > 0),
    created_at INTEGER NOT NULL,
    UNIQUE (tenant_id, name)
);

CREATE TABLE topic_configs (
    topic_id TEXT NOT NULL REFERENCES topics (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (topic_id, name)
);

-- replicas and isr are comma-separated broker ids, in preference order.
CREATE TABLE partitions (
    topic_id TEXT NOT NULL REFERENCES topics (id) ON DELETE CASCADE,
    partition INTEGER NOT NULL,
    replicas TEXT NOT NULL,
    isr TEXT NOT NULL,
    leader INTEGER NOT NULL,
    leader_epoch INTEGER NOT NULL,
    partition_epoch INTEGER NOT NULL,
    PRIMARY KEY (topic_id, partition)
);

CREATE TABLE brokers (
    node_id INTEGER PRIMARY KEY,
    host TEXT NOT NULL,
    port INTEGER NOT NULL,
    rack TEXT,
    incarnation TEXT NOT NULL,
    registered_at INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
);

CREATE TABLE producer_id_blocks (
    first_id INTEGER PRIMARY KEY,
    size INTEGER NOT NULL,
    node_id INTEGER NOT NULL,
    allocated_at INTEGER NOT NULL
);

-- One row per lease (the control plane's leadership); epoch grows with every new holder.
CREATE TABLE leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
