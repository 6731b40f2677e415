-- SCRAM-SHA-256 and SCRAM-SHA-512 credentials (KIP-84): what the server keeps of a
-- principal's password, one per mechanism, as base64 text. The password itself, and the
-- salted password, are never stored.
CREATE TABLE scram_credentials (
    principal_id TEXT NOT NULL REFERENCES principals (id) ON DELETE CASCADE,
    mechanism TEXT NOT NULL CHECK (mechanism IN ('SCRAM-SHA-256', 'SCRAM-SHA-512')),
    salt TEXT NOT NULL,
    iterations INTEGER NOT NULL,
    stored_key TEXT NOT NULL,
    server_key TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (principal_id, mechanism)
);
