-- A partition being reassigned (AlterPartitionReassignments): the replicas it is adding and
-- those it will remove once the new ones are in sync, comma-separated broker ids; both are
-- empty when no reassignment is in progress. `replicas` then holds the target followed by
-- the original replicas that are leaving.
ALTER TABLE partitions ADD COLUMN adding_replicas TEXT NOT NULL DEFAULT '';
ALTER TABLE partitions ADD COLUMN removing_replicas TEXT NOT NULL DEFAULT '';
