-- Details of file records the sync engine needs: a symlink's target, the
-- device that made the version, the inode for local change detection, and
-- local flags (such as a receive-only folder's unsent change).
ALTER TABLE files ADD COLUMN target TEXT NOT NULL DEFAULT '';
ALTER TABLE files ADD COLUMN modified_by INTEGER NOT NULL DEFAULT 0;
ALTER TABLE files ADD COLUMN inode INTEGER NOT NULL DEFAULT 0;
ALTER TABLE files ADD COLUMN flags INTEGER NOT NULL DEFAULT 0;
