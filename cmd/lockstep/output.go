package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"lockstep/sync/restore"
)

// jsonFlag adds --json to c. With it, c prints its result as one JSON value
// on stdout and nothing else there; messages and progress stay on stderr.
func jsonFlag(c *cobra.Command) {
	if c.Flags().Lookup("json") == nil { // added to a command that has it (scan --all)
		c.Flags().Bool("json", false, "print the result as JSON (one value on stdout)")
	}
}

// wantJSON reports whether c was given --json.
func wantJSON(c *cobra.Command) bool {
	v, _ := c.Flags().GetBool("json")
	return v
}

// emit prints the result v as JSON when c was given --json, else calls
// human with stdout.
func emit(c *cobra.Command, v any, human func(w io.Writer)) error {
	if wantJSON(c) {
		return printJSON(c.OutOrStdout(), v)
	}
	human(c.OutOrStdout())
	return nil
}

// changed is the JSON result of a command that changed one thing and has
// nothing more to say: what it did ("removed", "shared", ...), to which
// folder and which device.
type changed struct {
	Action string `json:"action"`
	Folder string `json:"folder,omitempty"`
	Device string `json:"device,omitempty"`
}

// isTerminal reports whether w is a terminal: progress is then a bar
// redrawn in place, else plain lines a log can keep.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// bar draws a progress bar of width cells, done of total.
func bar(done, total int64, width int) string {
	n := width
	if total > 0 {
		n = int(min(done, total) * int64(width) / total)
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

// plainWaitAfter is how long a wait goes on off a terminal before it is
// said, and how often it is said again: a short one leaves stderr to the
// one line of an error, a long one is not mistaken for a hang.
var plainWaitAfter = 2 * time.Second

// waiting says on w that something slow with no measure of its own is
// under way, until stop is called: on a terminal a line with the time so
// far, redrawn in place and cleared at the end; otherwise a plain line
// once it has taken plainWaitAfter, and again every 5 times that.
func waiting(w io.Writer, what string) (stop func()) {
	start := time.Now()
	done, finished := make(chan struct{}), make(chan struct{})
	terminal := isTerminal(w)
	go func() {
		defer close(finished)
		if !terminal {
			next := time.NewTimer(plainWaitAfter)
			defer next.Stop()
			for {
				select {
				case <-done:
					return
				case <-next.C:
					fmt.Fprintf(w, "%s ... (%.0fs)\n", what, time.Since(start).Seconds())
					next.Reset(5 * plainWaitAfter)
				}
			}
		}
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		spin := `|/-\`
		for i := 0; ; i++ {
			fmt.Fprintf(w, "\r%c %s %.1fs\x1b[K", spin[i%len(spin)], what, time.Since(start).Seconds())
			select {
			case <-done:
				fmt.Fprint(w, "\r\x1b[K")
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// recoveredJSON is what `recover --json` prints.
type recoveredJSON struct {
	Folder   string `json:"folder"`
	To       string `json:"to"`
	Files    int    `json:"files"`
	Dirs     int    `json:"dirs"`
	Symlinks int    `json:"symlinks"`
	Bytes    int64  `json:"bytes"`
	// Damaged names the files not restored; DamagedRecords counts records
	// that failed verification (their names are unknown).
	Damaged        []string `json:"damaged"`
	DamagedRecords int      `json:"damagedRecords"`
}

func recoveredOf(folder, to string, res restore.Result) recoveredJSON {
	return recoveredJSON{
		Folder: folder, To: to, Files: res.Files, Dirs: res.Dirs, Symlinks: res.Symlinks, Bytes: res.Bytes,
		Damaged: append([]string{}, res.Damaged...), DamagedRecords: res.DamagedRecords,
	}
}

// progressBar draws p as a bar: by bytes, else by files.
func progressBar(p restore.Progress) string {
	const width = 20
	if p.BytesTotal > 0 {
		return bar(p.Bytes, p.BytesTotal, width)
	}
	return bar(int64(p.Files), int64(p.FilesTotal), width)
}
