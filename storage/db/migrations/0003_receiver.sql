-- 0003: an untrusted receiver's holdings for its encrypted folders. A
-- receiver has no key: it stores sealed records and the IDs and sizes of
-- the sealed chunks they reference, and the folder key envelope.

-- The record log of an encrypted folder: log_id names its incarnation
-- (stored as the int64 bit pattern of the uint64; never 0).
CREATE TABLE receiver_logs (
	folder_id TEXT    NOT NULL PRIMARY KEY REFERENCES folders (id) ON DELETE CASCADE,
	log_id    INTEGER NOT NULL CHECK (log_id <> 0)
) STRICT;

-- Sealed records in log order. seq is the log sequence, increasing with
-- the order of appends. chunks is the concatenation of the 32-byte
-- encrypted chunk IDs the record references, every one of them held in
-- receiver_chunks; ref_bytes is the sum of their sizes.
CREATE TABLE receiver_records (
	folder_id TEXT    NOT NULL REFERENCES folders (id) ON DELETE CASCADE,
	seq       INTEGER NOT NULL CHECK (seq > 0),
	origin    BLOB    NOT NULL CHECK (length(origin) = 32),
	counter   INTEGER NOT NULL CHECK (counter >= 0),
	file_key  BLOB    NOT NULL CHECK (length(file_key) = 32),
	sealed    BLOB    NOT NULL,
	chunks    BLOB    NOT NULL CHECK (length(chunks) % 32 = 0),
	ref_bytes INTEGER NOT NULL CHECK (ref_bytes >= 0),
	stored_at INTEGER NOT NULL,
	PRIMARY KEY (folder_id, seq),
	UNIQUE (folder_id, origin, counter)
) STRICT;

-- Versions of one file, for counting files and for retention.
CREATE INDEX receiver_records_file ON receiver_records (folder_id, file_key);

-- Sealed chunks stored in the blob store.
CREATE TABLE receiver_chunks (
	folder_id TEXT    NOT NULL REFERENCES folders (id) ON DELETE CASCADE,
	id        BLOB    NOT NULL CHECK (length(id) = 32),
	size      INTEGER NOT NULL CHECK (size > 0),
	stored_at INTEGER NOT NULL,
	PRIMARY KEY (folder_id, id)
) STRICT;

-- The folder key envelope; generation counts its replacements from 1.
CREATE TABLE receiver_envelopes (
	folder_id  TEXT    NOT NULL PRIMARY KEY REFERENCES folders (id) ON DELETE CASCADE,
	envelope   BLOB    NOT NULL CHECK (length(envelope) > 0),
	generation INTEGER NOT NULL CHECK (generation > 0)
) STRICT;
