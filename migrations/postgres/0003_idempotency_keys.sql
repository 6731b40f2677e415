-- Requests a gateway answered under an Idempotency-Key: the producer id their records were
-- written with (so a retry is deduplicated by the brokers) and, once known, the outcome
-- replayed to later retries. Rows older than a day are removed.
CREATE TABLE idempotency_keys (
    tenant TEXT NOT NULL,
    principal TEXT NOT NULL,
    key TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    producer_id BIGINT NOT NULL,
    outcome TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (tenant, principal, key)
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
