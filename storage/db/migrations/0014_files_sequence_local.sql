-- The sequence index holds this node's own records only: a peer's records
-- are never read in sequence order (a folder's are loaded whole), and
-- indexing them cost every record of a peer's index a third b-tree to
-- update, and a node about 100 bytes of database per file.
DROP INDEX files_sequence;
CREATE INDEX files_sequence ON files (folder_id, sequence) WHERE device_id = '';
