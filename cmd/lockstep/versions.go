package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"lockstep/sync/restore"
	"lockstep/web"
)

// newVersioning is `folder versioning ID [--type T [--keep N] [--days N]]`.
func newVersioning(g *globals) *cobra.Command {
	var typ string
	var keep, days int
	c := &cobra.Command{
		Use:   "versioning ID [--type none|trashcan|simple|staggered [--keep N] [--days N]]",
		Short: "Keep replaced and deleted files under the folder's .lockstep/versions; without --type, show the policy",
		Example: "  lockstep folder versioning docs\n" +
			"  lockstep folder versioning docs --type simple --keep 10\n" +
			"  lockstep folder versioning docs --type trashcan --days 30\n" +
			"  lockstep folder versioning docs --type none",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, completeFolders),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			path := "/rest/folders/" + pathEscape(args[0]) + "/versioning"
			if typ != "" {
				err = cl.Do(c.Context(), http.MethodPut, path, web.Versioning{Type: typ, Keep: keep, Days: days}, nil)
			}
			var v web.Versioning
			if err == nil {
				err = cl.Do(c.Context(), http.MethodGet, path, nil, &v)
			}
			if err != nil {
				return onReceiver(c, cl, args[0], err)
			}
			return emit(c, versioningJSON{Folder: args[0], Versioning: v}, func(w io.Writer) {
				fmt.Fprintf(w, "%s: %s (keep %d, days %d)\n", args[0], v.Type, v.Keep, v.Days)
			})
		},
	}
	c.Flags().StringVar(&typ, "type", "", "none, trashcan (keep --days), simple (keep --keep per file) or staggered (thin out over --days); without it, show the current one")
	c.Flags().IntVar(&keep, "keep", 0, "simple: versions kept per file (default 5)")
	c.Flags().IntVar(&days, "days", 0, "trashcan: days kept (0 = forever); staggered: maximum age (default 365)")
	completeFlag(c, "type", "none", "trashcan", "simple", "staggered")
	jsonFlag(c)
	return c
}

// versioningJSON is what `folder versioning --json` prints.
type versioningJSON struct {
	Folder string `json:"folder"`
	web.Versioning
}

// retentionJSON is what `folder retention --json` prints.
type retentionJSON struct {
	Folder string `json:"folder"`
	web.Retention
}

// newRetention is `folder retention ID [--keep-...]`, on a receiver.
func newRetention(g *globals) *cobra.Command {
	var r web.Retention
	c := &cobra.Command{
		Use:   "retention ID [--keep-last N] [--keep-hourly N] [--keep-daily N] [--keep-weekly N] [--keep-monthly N] [--keep-yearly N] [--keep-deleted-days N]",
		Short: "Show or set which versions a receiver keeps of an encrypted folder (run on the receiver); `prune` applies it",
		Long: "Without flags, print the folder's retention policy. Each flag given sets that value and\n" +
			"leaves the others as they are. A version is kept if any rule keeps it; with every\n" +
			"keep count 0 all versions are kept (only --keep-deleted-days drops any).",
		Example: "  lockstep folder retention docs\n" +
			"  lockstep folder retention docs --keep-last 10 --keep-daily 14 --keep-monthly 12\n" +
			"  lockstep folder retention docs --keep-deleted-days 90\n" +
			"  lockstep prune docs --dry-run",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, completeFolders),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			path := "/rest/folders/" + pathEscape(args[0]) + "/retention"
			var cur web.Retention
			if err := cl.Do(c.Context(), http.MethodGet, path, nil, &cur); err != nil {
				return err
			}
			// Only the flags given change: --home and --json are flags
			// too, so counting flags cannot tell showing from setting.
			set := false
			for name, v := range map[string]*int{
				"keep-last": &cur.KeepLast, "keep-hourly": &cur.KeepHourly, "keep-daily": &cur.KeepDaily,
				"keep-weekly": &cur.KeepWeekly, "keep-monthly": &cur.KeepMonthly, "keep-yearly": &cur.KeepYearly,
				"keep-deleted-days": &cur.KeepDeletedDays,
			} {
				if c.Flags().Changed(name) {
					n, _ := c.Flags().GetInt(name)
					*v, set = n, true
				}
			}
			if set {
				if err := cl.Do(c.Context(), http.MethodPut, path, cur, nil); err != nil {
					return err
				}
			}
			return emit(c, retentionJSON{Folder: args[0], Retention: cur}, func(w io.Writer) {
				fmt.Fprintf(w, "folder %s keeps: keep-last %d, keep-hourly %d, keep-daily %d, keep-weekly %d, keep-monthly %d, keep-yearly %d, keep-deleted-days %d\n",
					args[0], cur.KeepLast, cur.KeepHourly, cur.KeepDaily, cur.KeepWeekly, cur.KeepMonthly, cur.KeepYearly, cur.KeepDeletedDays)
				if cur.KeepLast+cur.KeepHourly+cur.KeepDaily+cur.KeepWeekly+cur.KeepMonthly+cur.KeepYearly == 0 {
					fmt.Fprintln(w, "(every keep count is 0: all versions are kept)")
				}
			})
		},
	}
	f := c.Flags()
	f.IntVar(&r.KeepLast, "keep-last", 0, "keep the N newest versions of every file")
	f.IntVar(&r.KeepHourly, "keep-hourly", 0, "keep the newest version of each of the last N hours that have one")
	f.IntVar(&r.KeepDaily, "keep-daily", 0, "... days")
	f.IntVar(&r.KeepWeekly, "keep-weekly", 0, "... weeks")
	f.IntVar(&r.KeepMonthly, "keep-monthly", 0, "... months")
	f.IntVar(&r.KeepYearly, "keep-yearly", 0, "... years")
	f.IntVar(&r.KeepDeletedDays, "keep-deleted-days", 0, "drop every version of a file deleted more than N days ago (0: keep)")
	jsonFlag(c)
	return c
}

// onReceiver turns err, an error about folder id, into one that says what
// a receiver can and cannot do when this node holds id as a receiver:
// it cannot read the folder, so it has no versions to list, restore or
// keep by versioning; its history is in its retention policy. Any other
// error is returned as it is.
func onReceiver(c *cobra.Command, cl *web.Client, id string, err error) error {
	var folders []web.FolderStatus
	if cl.Do(c.Context(), http.MethodGet, "/rest/folders", nil, &folders) != nil {
		return err
	}
	for _, f := range folders {
		if f.ID == id && f.Type == "encrypted" {
			return fmt.Errorf("this node holds folder %s encrypted, as a receiver: it cannot read its files, so it has no versions to list, restore or keep by versioning;"+
				" here you can set which versions it keeps ('lockstep folder retention %s') and apply that ('lockstep prune %s');"+
				" list and restore versions on a trusted device that shares the folder ('lockstep versions %s' there)", id, id, id, id)
		}
	}
	return err
}

func newVersions(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "versions ID [PATH] [--json]",
		Short: "List kept versions of a folder's files, newest first (local and on receivers)",
		Example: "  lockstep versions docs\n" +
			"  lockstep versions docs notes/todo.txt\n" +
			"  lockstep versions docs notes/todo.txt --json | jq -r '.[0].version'",
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeArgs(g, completeFolders),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			path := "/rest/folders/" + pathEscape(args[0]) + "/versions"
			if len(args) == 2 {
				path += "?path=" + url.QueryEscape(args[1])
			}
			var vs []web.FileVersion
			if err := cl.Do(c.Context(), http.MethodGet, path, nil, &vs); err != nil {
				return onReceiver(c, cl, args[0], err)
			}
			if wantJSON(c) {
				return printJSON(c.OutOrStdout(), vs)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tSIZE\tSOURCE\tPATH\tVERSION")
			for _, v := range vs {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", v.Time.Local().Format(time.DateTime), v.Size, printable(v.Source), printable(v.Path), printable(v.Version))
			}
			return tw.Flush()
		},
	}
	jsonFlag(c)
	return c
}

// restoredJSON is what `restore --json` prints.
type restoredJSON struct {
	Folder string `json:"folder"`
	web.Restored
}

func newRestore(g *globals) *cobra.Command {
	var req web.Restore
	c := &cobra.Command{
		Use:   "restore ID (PATH [--version V | --at RFC3339] [--to DIR] | --all --at RFC3339 --to DIR)",
		Short: "Put back a kept version of a file (in place, the current one going to versioning, or into --to DIR)",
		Example: "  lockstep restore docs notes/todo.txt\n" +
			"  lockstep restore docs notes/todo.txt --version VERSION --to /tmp/old\n" +
			"  lockstep restore docs notes/todo.txt --at 2026-01-02T15:04:05Z\n" +
			"  # the whole folder as the receivers held it then\n" +
			"  lockstep restore docs --all --at 2026-01-02T15:04:05Z --to /tmp/docs-then",
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeArgs(g, completeFolders),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 2 {
				req.Path = args[1]
			}
			if !req.All && req.Path == "" {
				return usageError(c, "name the file to restore, or give --all")
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			// A whole folder can take longer than the client's usual
			// timeout; the command's context still ends it.
			long := *cl
			if long.HTTP != nil {
				hc := *long.HTTP
				hc.Timeout = 0
				long.HTTP = &hc
			} else {
				long.HTTP = &http.Client{}
			}
			ctx, stop := context.WithCancel(c.Context())
			defer stop()
			watched := make(chan struct{})
			go func() {
				defer close(watched)
				watchRestore(ctx, cl, args[0], newProgressPrinter(c.ErrOrStderr(), "restoring", args[0]))
			}()
			var res web.Restored
			err = long.Do(c.Context(), http.MethodPost, "/rest/folders/"+pathEscape(args[0])+"/restore", req, &res)
			stop()
			<-watched
			if err != nil {
				return onReceiver(c, cl, args[0], err)
			}
			if req.All && len(res.Restored) == 0 {
				return fmt.Errorf("nothing to restore: no receiver held a file of folder %s at %s (see 'lockstep versions %s' for the times it has)", args[0], req.At, args[0])
			}
			return emit(c, restoredJSON{Folder: args[0], Restored: res}, func(w io.Writer) {
				for _, p := range res.Restored {
					fmt.Fprintln(w, "restored", p)
				}
			})
		},
	}
	c.Flags().StringVar(&req.Version, "version", "", "the version to restore, as 'lockstep versions' lists it (local or a receiver's); default the newest local one")
	c.Flags().StringVar(&req.At, "at", "", "restore the version that was current at this time (RFC 3339)")
	c.Flags().StringVar(&req.To, "to", "", "write into this directory instead of the folder")
	c.Flags().BoolVar(&req.All, "all", false, "the whole folder (with --at and --to)")
	_ = c.MarkFlagDirname("to")
	jsonFlag(c)
	return c
}

// prunedJSON is what `prune --json` prints.
type prunedJSON struct {
	Folder string `json:"folder"`
	web.Pruned
}

func newPrune(g *globals) *cobra.Command {
	var req web.Prune
	c := &cobra.Command{
		Use:   "prune ID [--dry-run] [--grace DURATION]",
		Short: "Apply retention now: on a receiver drop versions and unreferenced chunks; on a trusted device clean local versions",
		Example: "  lockstep prune docs --dry-run\n" +
			"  lockstep prune docs\n" +
			"  lockstep prune docs --grace 0s --json",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, completeFolders),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			var res web.Pruned
			if err := cl.Do(c.Context(), http.MethodPost, "/rest/folders/"+pathEscape(args[0])+"/prune", req, &res); err != nil {
				return err
			}
			return emit(c, prunedJSON{Folder: args[0], Pruned: res}, func(out io.Writer) {
				if res.Versions != nil {
					for _, v := range res.Versions {
						fmt.Fprintf(out, "removed %s (%s, %d bytes)\n", printable(v.Path), printable(v.Version), v.Size)
					}
					fmt.Fprintf(out, "removed %d local versions (%d bytes)\n", len(res.Versions), res.Bytes)
					return
				}
				verb := "dropped"
				if res.DryRun {
					verb = "would drop"
				}
				fmt.Fprintf(out, "%s %d versions (%d files gone entirely), kept %d; %s %d chunks (%d bytes)\n",
					verb, res.Records, res.Files, res.Kept, map[bool]string{true: "would delete", false: "deleted"}[res.DryRun], res.Chunks, res.Bytes)
			})
		},
	}
	c.Flags().BoolVar(&req.DryRun, "dry-run", false, "say what would go, change nothing")
	c.Flags().StringVar(&req.Grace, "grace", "1h", "keep unreferenced chunks younger than this")
	jsonFlag(c)
	return c
}

// watchRestore prints the progress of a restore from receivers that the
// daemon reports in the folder's status, until ctx ends.
func watchRestore(ctx context.Context, cl *web.Client, folder string, pp *progressPrinter) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	shown := false
	for {
		select {
		case <-ctx.Done():
			if shown {
				pp.end()
			}
			return
		case <-t.C:
		}
		var fs []web.FolderStatus
		if err := cl.Do(ctx, http.MethodGet, "/rest/folders", nil, &fs); err != nil {
			continue
		}
		for _, f := range fs {
			if f.ID == folder && f.RestoreFilesTotal > 0 {
				shown = true
				pp.print(restore.Progress{Files: int(f.RestoreFiles), FilesTotal: int(f.RestoreFilesTotal), Bytes: f.RestoreBytes, BytesTotal: f.RestoreBytesTotal})
			}
		}
	}
}
