package main

import (
	"context"
	"errors"
	"log/slog"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/backup"
	"lockstep/sync/check"
)

// errNoStoreCheck is what a receiver answers until it can check its own
// store.
var errNoStoreCheck = errors.New("this receiver cannot check its own store yet")

// newChecks returns the node's check service: an encrypted folder (held
// here for others) checks this node's store against its database; any
// other folder checks its receivers from this device.
func newChecks(database *db.DB, bk *backup.Backup, log *slog.Logger) *check.Service {
	return check.NewService(func(ctx context.Context, folder string, o check.RunOptions, progress func(check.Progress)) ([]check.Report, error) {
		f, err := database.Folder(ctx, folder)
		if err != nil {
			return nil, err
		}
		if f.Type == db.Encrypted {
			return nil, errNoStoreCheck
		}
		return bk.Check(ctx, folder, o, func(_ crypt.DeviceID, p check.Progress) { progress(p) })
	}, database, log)
}
