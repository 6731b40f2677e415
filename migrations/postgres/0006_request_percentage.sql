-- Kafka's request-time quota: the share of one request-handling thread's time a tenant or
-- principal may take, in percent (100 = one thread's whole time); NULL is unlimited.
ALTER TABLE quotas ADD COLUMN request_percentage BIGINT;
