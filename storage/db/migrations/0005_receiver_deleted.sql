-- 0005: a sealed record says, readably, whether it is a deletion, so a
-- receiver can keep deleted files for a while under its retention policy
-- without the key.
ALTER TABLE receiver_records ADD COLUMN deleted INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1));
