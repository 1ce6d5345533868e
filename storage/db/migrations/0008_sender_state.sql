-- 0008: a trusted device's state of its folders and of the peers and
-- receivers it syncs them with, in tables of their own. Migrations 0001
-- to 0007 kept it as text in settings, under keys "<kind>/<folder>" and
-- "<kind>/<folder>/<device>"; this one moves those rows here.
--
-- Every row dies with its folder, and with its device when it names one.
-- The settings used to outlive both, so a folder added again under an old
-- ID took the old index ID (peers then skipped its new records), fixed
-- polynomial and versioning policy, and a device added again the old
-- cursors. Removing a folder or a device now forgets what this device
-- knew of it, as its shares and file records already were.
--
-- Unsigned 64-bit numbers (index IDs, polynomials) are stored as the
-- int64 bit pattern of the uint64, as receiver_logs.log_id is.

-- The key of a folder shared with receivers; it seals everything sent to
-- them. Was "folder-key/<folder>", hex.
CREATE TABLE folder_keys (
	folder_id TEXT NOT NULL PRIMARY KEY REFERENCES folders (id) ON DELETE CASCADE,
	key       BLOB NOT NULL CHECK (length(key) = 32)
) STRICT;

-- The ID of this device's index of a folder; a new one makes peers send
-- everything again. Was "index-id/<folder>", decimal.
CREATE TABLE folder_index_ids (
	folder_id TEXT    NOT NULL PRIMARY KEY REFERENCES folders (id) ON DELETE CASCADE,
	index_id  INTEGER NOT NULL CHECK (index_id <> 0)
) STRICT;

-- The folder's chunking polynomial, and whether it is fixed for good
-- (files were chunked with it). Was "polynomial/<folder>", decimal, and
-- "polynomial-fixed/<folder>" = "1".
CREATE TABLE folder_polynomials (
	folder_id  TEXT    NOT NULL PRIMARY KEY REFERENCES folders (id) ON DELETE CASCADE,
	polynomial INTEGER NOT NULL CHECK (polynomial <> 0),
	fixed      INTEGER NOT NULL DEFAULT 0 CHECK (fixed IN (0, 1))
) STRICT;

-- The folder's versioning policy, as sync/versions.Policy reads it (type
-- '' is none). Was "versioning/<folder>", JSON {"Type","Keep","Days"}.
CREATE TABLE folder_versioning (
	folder_id TEXT    NOT NULL PRIMARY KEY REFERENCES folders (id) ON DELETE CASCADE,
	type      TEXT    NOT NULL,
	keep      INTEGER NOT NULL CHECK (keep >= 0),
	days      INTEGER NOT NULL CHECK (days >= 0)
) STRICT;

-- The index ID a peer last announced for a folder: a trusted peer's
-- index, or a receiver's log. Was "peer-index-id/<folder>/<device>".
CREATE TABLE peer_index_ids (
	folder_id TEXT    NOT NULL REFERENCES folders (id) ON DELETE CASCADE,
	device_id TEXT    NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
	index_id  INTEGER NOT NULL CHECK (index_id <> 0),
	PRIMARY KEY (folder_id, device_id)
) STRICT;

-- An envelope sealed for a receiver that has not accepted the folder yet.
-- Was "pending-envelope/<folder>/<device>", hex.
CREATE TABLE pending_envelopes (
	folder_id TEXT NOT NULL REFERENCES folders (id) ON DELETE CASCADE,
	device_id TEXT NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
	envelope  BLOB NOT NULL CHECK (length(envelope) > 0),
	PRIMARY KEY (folder_id, device_id)
) STRICT;

-- What this device knows of a receiver's log of a folder, 0 for unknown:
-- the highest log sequence read (was "receiver-log/<folder>/<device>"),
-- the highest counter of this device's own records the receiver served
-- back ("receiver-held/...") and the log sequence it served it at
-- ("receiver-held-at/...").
CREATE TABLE receiver_views (
	folder_id TEXT    NOT NULL REFERENCES folders (id) ON DELETE CASCADE,
	device_id TEXT    NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
	cursor    INTEGER NOT NULL DEFAULT 0 CHECK (cursor >= 0),
	held      INTEGER NOT NULL DEFAULT 0 CHECK (held >= 0),
	held_at   INTEGER NOT NULL DEFAULT 0 CHECK (held_at >= 0),
	PRIMARY KEY (folder_id, device_id)
) STRICT;

-- Per origin device (canonical ID; not necessarily known here) of a
-- receiver's log: the highest counter read in it, and the highest the
-- receiver says it holds. Was "receiver-origins/<folder>/<device>", JSON
-- {"<origin>": {"seen": n, "mark": n}}.
CREATE TABLE receiver_view_origins (
	folder_id TEXT    NOT NULL REFERENCES folders (id) ON DELETE CASCADE,
	device_id TEXT    NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
	origin    TEXT    NOT NULL CHECK (origin <> ''),
	seen      INTEGER NOT NULL CHECK (seen >= 0),
	mark      INTEGER NOT NULL CHECK (mark >= 0),
	PRIMARY KEY (folder_id, device_id, origin)
) STRICT;

-- The old keys, parsed. kind is the key up to its first '/'. A folder ID
-- may hold any character, '/' too, so a device's key is cut from the
-- right: a canonical device ID is 63 characters, after a '/'. Only keys
-- of an existing folder (and device) are listed: the others were left
-- behind by a removal and are dropped. n is the value read as a decimal
-- uint64 (leading zeros allowed, as strconv reads it) in its int64 bit
-- pattern, NULL when it is not one; a value v >= 2^63 is built as
-- (high - 1844674406) * 10^10 + (low - 13709551616) = v - 2^64, from its
-- digits before and after the last ten, so that no step overflows.
CREATE TEMP VIEW old_keys AS
SELECT kind, folder_id, device_id, value,
	CASE
		WHEN digits IS NULL OR length(digits) > 20
			OR (length(digits) = 20 AND digits > '18446744073709551615') THEN NULL
		WHEN length(digits) < 19
			OR (length(digits) = 19 AND digits <= '9223372036854775807') THEN CAST(digits AS INTEGER)
		ELSE (CAST(substr(digits, 1, length(digits) - 10) AS INTEGER) - 1844674406) * 10000000000
			+ (CAST(substr(digits, -10) AS INTEGER) - 13709551616)
	END AS n
FROM (
	SELECT kind, value,
		CASE WHEN per_device THEN substr(rest, 1, length(rest) - 64) ELSE rest END AS folder_id,
		CASE WHEN per_device THEN substr(rest, -63) END AS device_id,
		CASE WHEN value <> '' AND value NOT GLOB '*[^0-9]*' THEN ltrim(value, '0') END AS digits,
		per_device, rest
	FROM (
		SELECT value,
			substr(key, 1, instr(key, '/')) AS kind,
			substr(key, instr(key, '/') + 1) AS rest,
			substr(key, 1, instr(key, '/')) IN ('peer-index-id/', 'pending-envelope/',
				'receiver-log/', 'receiver-held/', 'receiver-held-at/', 'receiver-origins/') AS per_device
		FROM settings
	)
)
WHERE kind IN ('folder-key/', 'index-id/', 'polynomial/', 'polynomial-fixed/', 'versioning/',
		'peer-index-id/', 'pending-envelope/',
		'receiver-log/', 'receiver-held/', 'receiver-held-at/', 'receiver-origins/')
	AND folder_id IN (SELECT id FROM folders)
	AND (NOT per_device OR (length(rest) > 64 AND substr(rest, -64, 1) = '/'
		AND device_id IN (SELECT id FROM devices)));

-- Values the old readers could not read (damaged hex or JSON, a number out
-- of range, a zero ID) were treated as missing or as an error; they are
-- not moved. A JSON null reads as the zero value, as encoding/json reads
-- it; a JSON number is moved only if json_extract makes an integer of it,
-- not a real (json_type says "integer" of 2^64-1 too).

INSERT INTO folder_keys (folder_id, key)
SELECT folder_id, unhex(value) FROM old_keys
WHERE kind = 'folder-key/' AND length(unhex(value)) = 32;

INSERT INTO folder_index_ids (folder_id, index_id)
SELECT folder_id, n FROM old_keys
WHERE kind = 'index-id/' AND n <> 0;

-- A fixed mark without a polynomial never happened: the polynomial is
-- written before it is fixed.
INSERT INTO folder_polynomials (folder_id, polynomial, fixed)
SELECT p.folder_id, p.n, EXISTS (SELECT 1 FROM old_keys f
	WHERE f.kind = 'polynomial-fixed/' AND f.folder_id = p.folder_id AND f.value = '1')
FROM old_keys p
WHERE p.kind = 'polynomial/' AND p.n <> 0;

INSERT INTO folder_versioning (folder_id, type, keep, days)
SELECT folder_id, coalesce(json_extract(value, '$.Type'), ''),
	coalesce(json_extract(value, '$.Keep'), 0), coalesce(json_extract(value, '$.Days'), 0)
FROM old_keys
WHERE kind = 'versioning/' AND json_valid(value) AND json_type(value) = 'object'
	AND coalesce(json_type(value, '$.Type'), 'null') IN ('text', 'null')
	AND typeof(coalesce(json_extract(value, '$.Keep'), 0)) = 'integer'
	AND typeof(coalesce(json_extract(value, '$.Days'), 0)) = 'integer'
	AND coalesce(json_extract(value, '$.Keep'), 0) >= 0
	AND coalesce(json_extract(value, '$.Days'), 0) >= 0;

INSERT INTO peer_index_ids (folder_id, device_id, index_id)
SELECT folder_id, device_id, n FROM old_keys
WHERE kind = 'peer-index-id/' AND n <> 0;

INSERT INTO pending_envelopes (folder_id, device_id, envelope)
SELECT folder_id, device_id, unhex(value) FROM old_keys
WHERE kind = 'pending-envelope/' AND length(unhex(value)) > 0;

-- The old readers took an unreadable or missing number for 0, as the
-- columns' defaults do; a negative n is a uint64 past int64.
INSERT INTO receiver_views (folder_id, device_id, cursor, held, held_at)
SELECT folder_id, device_id,
	coalesce(max(CASE WHEN kind = 'receiver-log/' THEN n END), 0),
	coalesce(max(CASE WHEN kind = 'receiver-held/' THEN n END), 0),
	coalesce(max(CASE WHEN kind = 'receiver-held-at/' THEN n END), 0)
FROM old_keys
WHERE kind IN ('receiver-log/', 'receiver-held/', 'receiver-held-at/') AND n > 0
GROUP BY folder_id, device_id;

-- json_each is given '{}' for a damaged value, which it would fail on. An
-- origin named twice (encoding/json never wrote one so) keeps the highest.
INSERT INTO receiver_view_origins (folder_id, device_id, origin, seen, mark)
SELECT o.folder_id, o.device_id, j.key,
	coalesce(json_extract(j.value, '$.seen'), 0), coalesce(json_extract(j.value, '$.mark'), 0)
FROM old_keys o,
	json_each(CASE WHEN json_valid(o.value) AND json_type(o.value) = 'object' THEN o.value ELSE '{}' END) j
WHERE o.kind = 'receiver-origins/' AND j.type = 'object' AND j.key <> ''
	AND typeof(coalesce(json_extract(j.value, '$.seen'), 0)) = 'integer'
	AND typeof(coalesce(json_extract(j.value, '$.mark'), 0)) = 'integer'
	AND coalesce(json_extract(j.value, '$.seen'), 0) >= 0
	AND coalesce(json_extract(j.value, '$.mark'), 0) >= 0
ON CONFLICT DO UPDATE SET seen = max(seen, excluded.seen), mark = max(mark, excluded.mark);

DROP VIEW old_keys;

-- Every key of these kinds goes: moved, damaged, or left by a removal.
DELETE FROM settings
WHERE substr(key, 1, instr(key, '/')) IN ('folder-key/', 'index-id/', 'polynomial/',
	'polynomial-fixed/', 'versioning/', 'peer-index-id/', 'pending-envelope/',
	'receiver-log/', 'receiver-held/', 'receiver-held-at/', 'receiver-origins/');
