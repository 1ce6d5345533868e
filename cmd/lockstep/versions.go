package main

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"lockstep/sync/restore"
	"lockstep/web"
)

// newVersioning is `folder versioning ID --type T [--keep N] [--days N]`.
func newVersioning(g *globals) *cobra.Command {
	var typ string
	var keep, days int
	c := &cobra.Command{
		Use:   "versioning ID --type none|trashcan|simple|staggered [--keep N] [--days N]",
		Short: "Keep replaced and deleted files under the folder's .lockstep/versions",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			path := "/rest/folders/" + pathEscape(args[0]) + "/versioning"
			if typ == "" {
				var v web.Versioning
				if err := cl.Do(c.Context(), http.MethodGet, path, nil, &v); err != nil {
					return err
				}
				fmt.Fprintf(c.OutOrStdout(), "%s: %s (keep %d, days %d)\n", args[0], v.Type, v.Keep, v.Days)
				return nil
			}
			if err := cl.Do(c.Context(), http.MethodPut, path, web.Versioning{Type: typ, Keep: keep, Days: days}, nil); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "folder %s: versioning %s\n", args[0], typ)
			return nil
		},
	}
	c.Flags().StringVar(&typ, "type", "", "none, trashcan (keep --days), simple (keep --keep per file) or staggered (thin out over --days); without it, show the current one")
	c.Flags().IntVar(&keep, "keep", 0, "simple: versions kept per file (default 5)")
	c.Flags().IntVar(&days, "days", 0, "trashcan: days kept (0 = forever); staggered: maximum age (default 365)")
	return c
}

// newRetention is `folder retention ID [--keep-...]`, on a receiver.
func newRetention(g *globals) *cobra.Command {
	var r web.Retention
	c := &cobra.Command{
		Use:   "retention ID [--keep-last N] [--keep-hourly N] [--keep-daily N] [--keep-weekly N] [--keep-monthly N] [--keep-yearly N] [--keep-deleted-days N]",
		Short: "Set which versions a receiver keeps of an encrypted folder (run on the receiver); `prune` applies it",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			path := "/rest/folders/" + pathEscape(args[0]) + "/retention"
			if c.Flags().NFlag() == 0 {
				var cur web.Retention
				if err := cl.Do(c.Context(), http.MethodGet, path, nil, &cur); err != nil {
					return err
				}
				return printJSON(c.OutOrStdout(), cur)
			}
			if err := cl.Do(c.Context(), http.MethodPut, path, r, nil); err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "folder %s: retention set\n", args[0])
			return nil
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
	return c
}

func newVersions(g *globals) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "versions ID [PATH] [--json]",
		Short: "List kept versions of a folder's files, newest first",
		Args:  cobra.RangeArgs(1, 2),
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
				return err
			}
			if asJSON {
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
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

func newRestore(g *globals) *cobra.Command {
	var req web.Restore
	c := &cobra.Command{
		Use:   "restore ID (PATH [--version V | --at RFC3339] [--to DIR] | --all --at RFC3339 --to DIR)",
		Short: "Put back a kept version of a file (in place, the current one going to versioning, or into --to DIR)",
		Args:  cobra.RangeArgs(1, 2),
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
			long.HTTP = &http.Client{}
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
				return err
			}
			for _, p := range res.Restored {
				fmt.Fprintln(c.OutOrStdout(), "restored", p)
			}
			return nil
		},
	}
	c.Flags().StringVar(&req.Version, "version", "", "the version to restore, as 'lockstep versions' lists it (local or a receiver's); default the newest local one")
	c.Flags().StringVar(&req.At, "at", "", "restore the version that was current at this time (RFC 3339)")
	c.Flags().StringVar(&req.To, "to", "", "write into this directory instead of the folder")
	c.Flags().BoolVar(&req.All, "all", false, "the whole folder (with --at and --to)")
	return c
}

func newPrune(g *globals) *cobra.Command {
	var req web.Prune
	c := &cobra.Command{
		Use:   "prune ID [--dry-run] [--grace DURATION]",
		Short: "Apply retention now: on a receiver drop versions and unreferenced chunks; on a trusted device clean local versions",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			var res web.Pruned
			if err := cl.Do(c.Context(), http.MethodPost, "/rest/folders/"+pathEscape(args[0])+"/prune", req, &res); err != nil {
				return err
			}
			out := c.OutOrStdout()
			if res.Versions != nil {
				for _, v := range res.Versions {
					fmt.Fprintf(out, "removed %s (%s, %d bytes)\n", printable(v.Path), printable(v.Version), v.Size)
				}
				fmt.Fprintf(out, "removed %d local versions (%d bytes)\n", len(res.Versions), res.Bytes)
				return nil
			}
			verb := "dropped"
			if res.DryRun {
				verb = "would drop"
			}
			fmt.Fprintf(out, "%s %d versions (%d files gone entirely), kept %d; %s %d chunks (%d bytes)\n",
				verb, res.Records, res.Files, res.Kept, map[bool]string{true: "would delete", false: "deleted"}[res.DryRun], res.Chunks, res.Bytes)
			return nil
		},
	}
	c.Flags().BoolVar(&req.DryRun, "dry-run", false, "say what would go, change nothing")
	c.Flags().StringVar(&req.Grace, "grace", "1h", "keep unreferenced chunks younger than this")
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
