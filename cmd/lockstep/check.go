package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"lockstep/sync/check"
	"lockstep/sync/restore"
	"lockstep/web"
)

// errProblems is the error of a check that found problems: exit code 4.
var errProblems = errors.New("the check found problems")

func newCheck(g *globals) *cobra.Command {
	var receiverID, subset string
	var readData, repair bool
	c := &cobra.Command{
		Use:   "check FOLDER [--receiver ID] [--read-data | --read-data-subset N%|SIZE] [--repair]",
		Short: "Verify a folder's backups on its receivers without restoring them",
		Long: "On a trusted device: read each receiver's log and chunk list, open every record with the folder key, " +
			"check the log against what this device knows and the checkpoints it carries, and that every chunk every kept " +
			"version needs is there with a size it can have. --read-data also fetches every chunk and opens it; " +
			"--read-data-subset fetches a random share (another one each run). Nothing is written into the folder. " +
			"--repair sends each chunk found missing or cut short again, sealed from this device's files when they still hold it, " +
			"else copied from another receiver, and says what it could not repair (a receiver never replaces a copy that reads " +
			"whole, so a chunk whose bytes changed is reported, not overwritten).\n\n" +
			"On a receiver: check its own store against its database, with no key: every object present with its size, " +
			"packs whole, no orphans or temporary files left over.\n\n" +
			"Exits 0 when clean, 4 when problems were found.",
		Example: "  lockstep check docs\n" +
			"  lockstep check docs --read-data-subset 5% --json\n" +
			"  lockstep check docs --receiver RECEIVER-ID --read-data --repair",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, completeFolders),
		RunE: func(c *cobra.Command, args []string) error {
			if readData && subset != "" {
				return usageErr{"--read-data and --read-data-subset exclude each other"}
			}
			req := web.CheckRequest{Receiver: receiverID, ReadData: subset, Repair: repair}
			if readData {
				req.ReadData = "all"
			}
			if _, err := check.ParseReadData(req.ReadData); err != nil {
				return usageErr{"--read-data-subset: " + err.Error()}
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			folder := args[0]
			res, err := runCheck(c.Context(), c.ErrOrStderr(), cl, folder, req)
			if err != nil {
				return err
			}
			if jerr := emit(c, res, func(w io.Writer) { printCheck(w, folder, res) }); jerr != nil {
				return jerr
			}
			if !res.Clean {
				return fmt.Errorf("%w in folder %s", errProblems, folder)
			}
			return nil
		},
	}
	c.Flags().StringVar(&receiverID, "receiver", "", "check only this receiver (a trusted device checks all of the folder's)")
	c.Flags().BoolVar(&readData, "read-data", false, "fetch and open every chunk")
	c.Flags().StringVar(&subset, "read-data-subset", "", "fetch and open a random N% of the chunks, or SIZE bytes of them (500MiB)")
	c.Flags().BoolVar(&repair, "repair", false, "send chunks found missing or cut short again, from this device's files or another receiver")
	_ = c.RegisterFlagCompletionFunc("receiver", func(c *cobra.Command, _ []string, s string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return completeArgs(g, completeDevices)(c, nil, s)
	})
	jsonFlag(c)
	return c
}

// runCheck runs a check through the daemon, showing its progress on
// stderr while it runs.
func runCheck(ctx context.Context, stderr io.Writer, cl *web.Client, folder string, req web.CheckRequest) (web.CheckResult, error) {
	path := "/rest/folders/" + pathEscape(folder) + "/check"
	type answer struct {
		res web.CheckResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		var a answer
		// As long as the check takes: reading a large store's data can
		// take hours.
		a.err = cl.Unbounded().Do(ctx, http.MethodPost, path, req, &a.res)
		done <- a
	}()
	pp := newProgressPrinter(stderr, "checking", folder)
	pp.noun = "chunks"
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case a := <-done:
			pp.end()
			return a.res, a.err
		case <-tick.C:
			var st web.CheckState
			if cl.Do(ctx, http.MethodGet, path, nil, &st) == nil && st.Running != nil && (st.Running.Phase == "data" || st.Running.Phase == "store") {
				p := st.Running
				pp.noun = map[string]string{"data": "chunks", "store": "objects"}[p.Phase]
				pp.print(restore.Progress{Files: p.Chunks, FilesTotal: p.ChunksTotal, Bytes: p.Bytes, BytesTotal: p.BytesTotal})
			}
		}
	}
}

// printCheck prints a check's result for people.
func printCheck(w io.Writer, folder string, res web.CheckResult) {
	for _, r := range res.Reports {
		who := "receiver " + r.Receiver
		if r.Receiver == "" {
			who = "this receiver's store"
		}
		fmt.Fprintf(w, "folder %s, %s (%s): %s\n", folder, who, r.Mode, r.Summary())
		fmt.Fprintf(w, "  %d records, %d versions, %d chunks", r.Records, r.Versions, r.Chunks)
		if r.Objects > 0 {
			fmt.Fprintf(w, ", %d objects", r.Objects)
		}
		fmt.Fprintf(w, ", %s read in %s\n", mib(r.BytesRead), r.Duration.Round(time.Millisecond))
		for _, p := range r.Problems {
			line := "  " + string(p.Kind)
			if p.Path != "" {
				line += " " + p.Path
				if p.Version != "" {
					line += " (version " + p.Version + ")"
				}
			}
			if p.Object != "" {
				line += " [" + p.Object + "]"
			}
			fmt.Fprintln(w, escapeControls(line+": "+p.Detail))
		}
		if r.Truncated > 0 {
			fmt.Fprintf(w, "  ... and %d more problems (see --json)\n", r.Truncated)
		}
		for _, what := range r.Repaired {
			fmt.Fprintln(w, "  repaired "+escapeControls(what))
		}
		for _, what := range r.Unrepaired {
			fmt.Fprintln(w, "  not repaired "+escapeControls(what))
		}
	}
}

// folderCheck is `folder check ID`: the folder's check schedule and last
// result, or a new schedule.
func folderCheck(g *globals) *cobra.Command {
	var every, subset string
	var readData bool
	c := &cobra.Command{
		Use:   "check ID [--every 7d [--read-data | --read-data-subset N%|SIZE]]",
		Short: "Show or set how often the daemon checks a folder's backups",
		Long: "Without flags, print the folder's check schedule and its last check. With --every, the daemon checks the " +
			"folder at that interval (as `lockstep check` would) and keeps the result, shown in status and on the console; " +
			"a failed check is an error of the folder until a later one is clean. --every 0 removes the schedule.",
		Example: "  lockstep folder check docs --every 7d --read-data-subset 5%\n" +
			"  lockstep folder check docs\n" +
			"  lockstep folder check docs --every 0",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, completeFolders),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			id := args[0]
			path := "/rest/folders/" + pathEscape(id) + "/check"
			if !c.Flags().Changed("every") {
				if readData || subset != "" {
					return usageErr{"--read-data and --read-data-subset go with --every"}
				}
				var st web.CheckState
				if err := cl.Do(c.Context(), http.MethodGet, path, nil, &st); err != nil {
					return err
				}
				return emit(c, st, func(w io.Writer) { printCheckState(w, id, st) })
			}
			if readData && subset != "" {
				return usageErr{"--read-data and --read-data-subset exclude each other"}
			}
			req := web.CheckSchedule{Every: every, ReadData: subset}
			if readData {
				req.ReadData = "all"
			}
			if err := cl.Do(c.Context(), http.MethodPut, path+"/schedule", req, nil); err != nil {
				return err
			}
			done := changed{Action: "scheduled", Folder: id}
			msg := fmt.Sprintf("folder %s: checked every %s", id, every)
			if req.ReadData != "" {
				msg += ", reading " + req.ReadData + " of the data"
			}
			if every == "0" || every == "" {
				done.Action, msg = "unscheduled", "folder "+id+": no scheduled checks"
			}
			return emit(c, done, func(w io.Writer) { fmt.Fprintln(w, msg) })
		},
	}
	c.Flags().StringVar(&every, "every", "", "check at this interval (7d, 12h; 0 removes the schedule)")
	c.Flags().BoolVar(&readData, "read-data", false, "each check fetches and opens every chunk")
	c.Flags().StringVar(&subset, "read-data-subset", "", "each check fetches and opens a random N% or SIZE of the chunks")
	jsonFlag(c)
	return c
}

// printCheckState prints a folder's check state for people.
func printCheckState(w io.Writer, id string, st web.CheckState) {
	if st.Every == "" {
		fmt.Fprintf(w, "folder %s: no scheduled checks\n", id)
	} else {
		line := fmt.Sprintf("folder %s: checked every %s", id, st.Every)
		if st.ReadData != "" {
			line += ", reading " + st.ReadData + " of the data"
		}
		fmt.Fprintln(w, line)
	}
	switch {
	case st.Last == nil:
		fmt.Fprintln(w, "never checked")
	default:
		fmt.Fprintf(w, "last check %s: %s\n", st.Last.Finished.Local().Format(time.DateTime), st.Last.Summary)
		if !st.Last.Clean && st.Last.LastClean != nil {
			fmt.Fprintf(w, "last clean check %s\n", st.Last.LastClean.Local().Format(time.DateTime))
		}
	}
	if f := st.Failed; f != nil {
		fmt.Fprintf(w, "the last check, %s, could not run: %s\n", f.At.Local().Format(time.DateTime), escapeControls(f.Err))
	}
	if st.Overdue {
		fmt.Fprintln(w, "warning: no clean check within the interval")
	}
	if st.Running != nil {
		fmt.Fprintf(w, "a check is running (%s)\n", st.Running.Phase)
	}
}
