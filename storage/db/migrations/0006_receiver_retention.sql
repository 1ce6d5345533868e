-- 0006: retention on a receiver. A folder's policy, and the high-water
-- marks pruning must never lower: the highest log sequence and, per origin
-- device, the highest counter the folder ever held.

-- The policy of an encrypted folder; no row keeps everything.
CREATE TABLE receiver_retention (
	folder_id         TEXT    NOT NULL PRIMARY KEY REFERENCES folders (id) ON DELETE CASCADE,
	keep_last         INTEGER NOT NULL CHECK (keep_last >= 0),
	keep_hourly       INTEGER NOT NULL CHECK (keep_hourly >= 0),
	keep_daily        INTEGER NOT NULL CHECK (keep_daily >= 0),
	keep_weekly       INTEGER NOT NULL CHECK (keep_weekly >= 0),
	keep_monthly      INTEGER NOT NULL CHECK (keep_monthly >= 0),
	keep_yearly       INTEGER NOT NULL CHECK (keep_yearly >= 0),
	keep_deleted_days INTEGER NOT NULL CHECK (keep_deleted_days >= 0)
) STRICT;

-- Per (folder, origin) the highest counter ever held, raised when records
-- are pruned; the counter announced is the max of this and the records'.
CREATE TABLE receiver_high_water (
	folder_id TEXT    NOT NULL REFERENCES folders (id) ON DELETE CASCADE,
	origin    BLOB    NOT NULL CHECK (length(origin) = 32),
	counter   INTEGER NOT NULL CHECK (counter >= 0),
	PRIMARY KEY (folder_id, origin)
) STRICT;

-- The highest log sequence ever held, raised when records are pruned; the
-- log's sequence is the max of this and the records'.
ALTER TABLE receiver_logs ADD COLUMN high_seq INTEGER NOT NULL DEFAULT 0 CHECK (high_seq >= 0);
