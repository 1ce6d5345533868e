-- 0011: a folder's key can be rotated.
--
-- folder_keys keeps the folder's first key (generation 1), from which
-- names, chunk IDs and the chunking polynomial derive for good; each
-- rotation adds the next generation here, and the newest seals.
CREATE TABLE folder_key_ring (
	folder_id  TEXT    NOT NULL REFERENCES folders (id) ON DELETE CASCADE,
	generation INTEGER NOT NULL CHECK (generation BETWEEN 2 AND 255),
	key        BLOB    NOT NULL CHECK (length(key) = 32),
	PRIMARY KEY (folder_id, generation)
) STRICT;
