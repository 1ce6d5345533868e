-- 0009: a device's trust changes only by an explicit step, and a device
-- that was untrusted here once is remembered as such for good.
--
-- Re-adding a receiver used to make it trusted, and the next share sent
-- it plaintext. untrusted_history lists every device this node has held
-- as untrusted; it has no foreign key on purpose: it outlives the
-- device's removal, so a receiver removed and added again is still known
-- to have been one. The triggers fill it whichever way a device becomes
-- untrusted.

-- When the device's trust last changed (unix nanoseconds, 0: never since
-- it was added).
ALTER TABLE devices ADD COLUMN trust_changed_at INTEGER NOT NULL DEFAULT 0;

CREATE TABLE untrusted_history (
	device_id TEXT    NOT NULL PRIMARY KEY CHECK (device_id <> ''),
	-- When this node first held it as untrusted.
	since     INTEGER NOT NULL
) STRICT;

INSERT INTO untrusted_history (device_id, since)
SELECT id, added_at FROM devices WHERE untrusted = 1;

CREATE TRIGGER devices_untrusted_insert AFTER INSERT ON devices
WHEN NEW.untrusted = 1
BEGIN
	INSERT OR IGNORE INTO untrusted_history (device_id, since) VALUES (NEW.id, NEW.added_at);
END;

CREATE TRIGGER devices_untrusted_update AFTER UPDATE OF untrusted ON devices
WHEN NEW.untrusted = 1
BEGIN
	INSERT OR IGNORE INTO untrusted_history (device_id, since)
	VALUES (NEW.id, CASE WHEN NEW.trust_changed_at <> 0 THEN NEW.trust_changed_at ELSE NEW.added_at END);
END;
