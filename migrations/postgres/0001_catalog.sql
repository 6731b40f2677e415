-- The catalog: tenants and who acts for them, what they may do, and where their topics live.
-- Identifiers are UUIDs as text, times milliseconds since the Unix epoch and every integer
-- 64-bit, so the PostgreSQL and SQLite schemas hold and return the same values.

CREATE TABLE tenants (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);

CREATE TABLE principals (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    kind TEXT NOT NULL CHECK (kind IN ('user', 'service_account')),
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (tenant_id, name)
);

CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    principal_id TEXT NOT NULL REFERENCES principals (id) ON DELETE CASCADE,
    secret_hash TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT,
    last_used_at BIGINT
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
    produce_bytes_per_sec BIGINT,
    fetch_bytes_per_sec BIGINT,
    requests_per_sec BIGINT,
    partitions BIGINT,
    PRIMARY KEY (tenant_id, principal_id)
);

CREATE TABLE topics (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    partitions BIGINT NOT NULL CHECK (partitions > 0),
    replication_factor BIGINT NOT NULL CHECK (replication_factor > 0),
    created_at BIGINT NOT NULL,
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
    partition BIGINT NOT NULL,
    replicas TEXT NOT NULL,
    isr TEXT NOT NULL,
    leader BIGINT NOT NULL,
    leader_epoch BIGINT NOT NULL,
    partition_epoch BIGINT NOT NULL,
    PRIMARY KEY (topic_id, partition)
);

CREATE TABLE brokers (
    node_id BIGINT PRIMARY KEY,
    host TEXT NOT NULL,
    port BIGINT NOT NULL,
    rack TEXT,
    incarnation TEXT NOT NULL,
    registered_at BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL
);

CREATE TABLE producer_id_blocks (
    first_id BIGINT PRIMARY KEY,
    size BIGINT NOT NULL,
    node_id BIGINT NOT NULL,
    allocated_at BIGINT NOT NULL
);

-- One row per lease (the control plane's leadership); epoch grows with every new holder.
CREATE TABLE leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
