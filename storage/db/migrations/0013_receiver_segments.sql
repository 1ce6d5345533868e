-- 0013: where a receiver keeps each encrypted folder in its store.
--
-- A folder's store segment was always the hex of its ID's bytes; a
-- receiver with a store key (serve --opaque-store) keeps new folders under
-- a segment the key derives, which says nothing of the ID. The segment is
-- recorded here so that a folder stays where it is whatever the flags of
-- later starts. Existing folders keep the hex of their ID.
CREATE TABLE receiver_segments (
	folder_id TEXT NOT NULL PRIMARY KEY REFERENCES folders (id) ON DELETE CASCADE,
	segment   TEXT NOT NULL UNIQUE CHECK (length(segment) > 0)
) STRICT;

INSERT INTO receiver_segments (folder_id, segment)
	SELECT id, lower(hex(id)) FROM folders WHERE type = 'encrypted';
