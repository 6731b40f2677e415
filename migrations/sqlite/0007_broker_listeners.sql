-- Every listener a broker advertises, in Kafka's `advertised.listeners` form
-- (NAME://host:port,...), so that a client on one listener is told the same listener of
-- every other broker; NULL for a broker that registered its inter-broker address alone.
ALTER TABLE brokers ADD COLUMN advertised_listeners TEXT;
