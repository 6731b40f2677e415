-- The tenant a broker's Kafka listener serves; NULL serves every tenant. Topics are placed
-- only on brokers that serve their tenant.
ALTER TABLE brokers ADD COLUMN tenant TEXT;
