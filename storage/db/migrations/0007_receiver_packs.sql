-- 0007: a receiver stores small sealed chunks in packs, objects
-- r/<fk>/p/<pack hex> of many chunk bodies each. A packed chunk's row
-- names its pack (16 bytes) and its offset there; its length is its size.
-- A row without a pack is a chunk stored as a blob of its own.
ALTER TABLE receiver_chunks ADD COLUMN pack BLOB CHECK (pack IS NULL OR length(pack) = 16);
ALTER TABLE receiver_chunks ADD COLUMN pack_offset INTEGER
	CHECK ((pack IS NULL AND pack_offset IS NULL) OR (pack IS NOT NULL AND pack_offset >= 0));

-- The chunks of one pack, for serving, garbage collection and repacking.
CREATE INDEX receiver_chunks_pack ON receiver_chunks (folder_id, pack) WHERE pack IS NOT NULL;
