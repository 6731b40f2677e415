-- The most bytes a tenant's logs may take on one broker's volume, each segment file charged
-- a file system block beyond its bytes; NULL is unlimited. Tenant-wide only.
ALTER TABLE quotas ADD COLUMN storage_bytes BIGINT;
