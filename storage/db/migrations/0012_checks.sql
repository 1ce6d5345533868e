-- 0012: backup checks (sync/check).
--
-- folder_checks holds a folder's check schedule: every every_seconds,
-- reading the data read_data names ("" for a metadata check, "all", "N%"
-- or a size such as "1GiB"). check_results holds the last check of each
-- folder: when it ended, whether it was clean, when a check was last clean,
-- and its reports (JSON, one per receiver).
CREATE TABLE folder_checks (
	folder_id     TEXT    NOT NULL PRIMARY KEY REFERENCES folders (id) ON DELETE CASCADE,
	every_seconds INTEGER NOT NULL CHECK (every_seconds > 0),
	read_data     TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE TABLE check_results (
	folder_id     TEXT    NOT NULL PRIMARY KEY REFERENCES folders (id) ON DELETE CASCADE,
	finished_at   INTEGER NOT NULL,
	clean         INTEGER NOT NULL CHECK (clean IN (0, 1)),
	last_clean_at INTEGER NOT NULL DEFAULT 0,
	reports       BLOB    NOT NULL
) STRICT;
