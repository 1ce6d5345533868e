-- 0001: the initial schema.
--
-- Times are UTC unix nanoseconds (0 means "never" / unset). Booleans are
-- INTEGER 0 or 1. Tables are STRICT so a value of the wrong type is refused
-- instead of silently stored.

CREATE TABLE settings (
	key   TEXT NOT NULL PRIMARY KEY CHECK (key <> ''),
	value TEXT NOT NULL
) STRICT;

CREATE TABLE devices (
	id        TEXT    NOT NULL PRIMARY KEY CHECK (id <> ''),
	name      TEXT    NOT NULL DEFAULT '',
	addresses TEXT    NOT NULL DEFAULT '[]'
	          CHECK (json_valid(addresses) AND json_type(addresses) = 'array'),
	untrusted INTEGER NOT NULL DEFAULT 0 CHECK (untrusted IN (0, 1)),
	added_at  INTEGER NOT NULL,
	last_seen INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE pending_devices (
	id         TEXT    NOT NULL PRIMARY KEY CHECK (id <> ''),
	name       TEXT    NOT NULL DEFAULT '',
	address    TEXT    NOT NULL DEFAULT '',
	first_seen INTEGER NOT NULL,
	last_seen  INTEGER NOT NULL
) STRICT;

CREATE TABLE folders (
	id         TEXT    NOT NULL PRIMARY KEY CHECK (id <> ''),
	label      TEXT    NOT NULL DEFAULT '',
	path       TEXT    NOT NULL,
	type       TEXT    NOT NULL
	           CHECK (type IN ('sendreceive', 'sendonly', 'receiveonly', 'encrypted')),
	created_at INTEGER NOT NULL,
	paused     INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
	error      TEXT    NOT NULL DEFAULT ''
) STRICT;

CREATE TABLE folder_shares (
	folder_id TEXT NOT NULL REFERENCES folders (id) ON DELETE CASCADE,
	device_id TEXT NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
	PRIMARY KEY (folder_id, device_id)
) STRICT;

-- Lets RemoveDevice's cascade and DeviceFolders find a device's shares
-- without a scan.
CREATE INDEX folder_shares_device ON folder_shares (device_id);

-- A folder offered by a known device that this node does not have yet.
-- Offers die with the device that made them.
CREATE TABLE pending_folders (
	device_id  TEXT    NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
	folder_id  TEXT    NOT NULL CHECK (folder_id <> ''),
	label      TEXT    NOT NULL DEFAULT '',
	first_seen INTEGER NOT NULL,
	PRIMARY KEY (device_id, folder_id)
) STRICT;

-- File records. device_id is '' for this node's own records and the peer's
-- canonical device ID for records learnt from it. version and chunks are
-- encoded by sync/index; this layer does not interpret them.
CREATE TABLE files (
	folder_id TEXT    NOT NULL REFERENCES folders (id) ON DELETE CASCADE,
	device_id TEXT    NOT NULL,
	name      TEXT    NOT NULL CHECK (name <> ''),
	type      TEXT    NOT NULL CHECK (type IN ('file', 'dir', 'symlink')),
	size      INTEGER NOT NULL CHECK (size >= 0),
	mode      INTEGER NOT NULL CHECK (mode >= 0),
	mtime_ns  INTEGER NOT NULL,
	deleted   INTEGER NOT NULL CHECK (deleted IN (0, 1)),
	version   BLOB    NOT NULL,
	chunks    BLOB    NOT NULL,
	sequence  INTEGER NOT NULL CHECK (sequence >= 0),
	PRIMARY KEY (folder_id, device_id, name)
) STRICT;

CREATE INDEX files_sequence ON files (folder_id, device_id, sequence);
