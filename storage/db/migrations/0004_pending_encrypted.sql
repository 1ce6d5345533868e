-- 0004: a folder offer says whether the offering device shares it with
-- this node as an untrusted receiver, so accepting it makes an encrypted
-- folder.
ALTER TABLE pending_folders ADD COLUMN encrypted INTEGER NOT NULL DEFAULT 0 CHECK (encrypted IN (0, 1));
