package main

import (
	"context"
	"log/slog"

	"lockstep/crypt"
	"lockstep/storage/db"
	"lockstep/sync/backup"
	"lockstep/sync/check"
	"lockstep/sync/receiver"
)

// newChecks returns the node's check service: an encrypted folder (held
// here for others) checks this node's store against its database; any
// other folder checks its receivers from this device.
func newChecks(database *db.DB, bk *backup.Backup, recv *receiver.Receiver, log *slog.Logger) *check.Service {
	return check.NewService(func(ctx context.Context, folder string, o check.RunOptions, progress func(check.Progress)) ([]check.Report, error) {
		f, err := database.Folder(ctx, folder)
		if err != nil {
			return nil, err
		}
		if f.Type == db.Encrypted {
			rep, err := recv.Check(ctx, folder, receiver.CheckOptions{Progress: func(done, total int) {
				progress(check.Progress{Phase: "store", Chunks: done, ChunksTotal: total})
			}})
			if err != nil {
				return nil, err
			}
			return []check.Report{rep}, nil
		}
		return bk.Check(ctx, folder, o, func(_ crypt.DeviceID, p check.Progress) { progress(p) })
	}, database, log)
}
