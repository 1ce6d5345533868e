-- 0010: a device can be paused.
--
-- A paused device is neither dialled nor let in, and its connection is
-- dropped when it is paused; it keeps its folders, its trust and its
-- name, so resuming it takes up where it was. Folders had their own
-- paused column from the start.
ALTER TABLE devices ADD COLUMN paused INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1));
