package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"lockstep/crypt"
	"lockstep/storage/home"
	"lockstep/sync/connections"
	"lockstep/sync/restore"
)

func newRecover(g *globals) *cobra.Command {
	var from, device, folder, passwordFile, to string
	var acceptIncomplete bool
	c := &cobra.Command{
		Use:   "recover --from tcp://HOST:PORT --device RECEIVER_ID --folder ID --password-file F --to DIR",
		Short: "Rebuild a folder from an untrusted receiver alone, verifying everything",
		Long: "Fetch the current state of an encrypted folder from a receiver and write it to DIR " +
			"(created; it must be empty if it exists). Needs only this device's identity (created if missing) " +
			"and the folder password; the receiver must have accepted this device and shared the folder with it. " +
			"No daemon needs to run.",
		Example: "  lockstep recover --from tcp://vps.example.org:22100 --device RECEIVER-ID \\\n" +
			"      --folder docs --password-file ~/.docs-password --to ~/Documents",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			addr, err := connections.ParseAddress(from)
			if err != nil {
				return fmt.Errorf("--from: %w", err)
			}
			recv, err := crypt.ParseDeviceID(device)
			if err != nil {
				return fmt.Errorf("--device: %w", err)
			}
			pw, err := readPassword(passwordFile)
			if err != nil {
				return err
			}
			target, err := filepath.Abs(to)
			if err != nil {
				return fmt.Errorf("--to: %w", err)
			}
			id, err := loadOrInitIdentity(g)
			if err != nil {
				return err
			}
			stderr := c.ErrOrStderr()
			pp := newProgressPrinter(stderr, "recovering", folder)
			res, err := restore.Recover(c.Context(), restore.Options{
				Identity: id,
				Address:  addr,
				Receiver: recv,
				Folder:   folder,
				Password: []byte(pw),
				To:       target,
				Progress: pp.print,
				Log:      slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
				Version:  version,

				AcceptIncomplete: acceptIncomplete,
			})
			pp.end()
			if err != nil && !errors.Is(err, restore.ErrDamaged) && !errors.Is(err, restore.ErrIncomplete) {
				return err
			}
			printProofs(stderr, res)
			if errors.Is(err, restore.ErrIncomplete) && !acceptIncomplete {
				return fmt.Errorf("%w; nothing was written (--accept-incomplete writes what the receiver holds)", err)
			}
			if jerr := emit(c, recoveredOf(folder, target, res), func(w io.Writer) {
				fmt.Fprintf(w, "recovered %d files (%s) of folder %s into %s%s\n", res.Files, mib(res.Bytes), folder, target, asOf(res))
			}); jerr != nil {
				return jerr
			}
			return err
		},
	}
	c.Flags().StringVar(&from, "from", "", "the receiver's address, tcp://HOST:PORT")
	c.Flags().StringVar(&device, "device", "", "the receiver's device ID")
	c.Flags().StringVar(&folder, "folder", "", "the folder ID")
	c.Flags().StringVar(&passwordFile, "password-file", "", "file holding the folder password (first line)")
	c.Flags().StringVar(&to, "to", "", "directory to write the folder into (created; must be empty)")
	c.Flags().BoolVar(&acceptIncomplete, "accept-incomplete", false, "write what the receiver holds even when its checkpoints prove records missing (exits non-zero still)")
	for _, name := range []string{"from", "device", "folder", "password-file", "to"} {
		_ = c.MarkFlagRequired(name)
	}
	_ = c.MarkFlagDirname("to")
	_ = c.MarkFlagFilename("password-file")
	jsonFlag(c)
	return c
}

// asOf says when the state recovered was the newest a device had sealed.
func asOf(res restore.Result) string {
	if res.AsOf.IsZero() {
		return ""
	}
	return ", as of " + res.AsOf.UTC().Format(time.RFC3339)
}

// printProofs warns of what the receiver's checkpoints do not prove.
func printProofs(w io.Writer, res restore.Result) {
	if len(res.Proofs) == 0 {
		fmt.Fprintln(w, "warning: the receiver's log carries no checkpoint (written by an older lockstep?): that it holds every record can't be proven")
		return
	}
	for _, p := range res.Proofs {
		if !p.Complete {
			fmt.Fprintf(w, "warning: device %s's checkpoint of %s: the receiver gives %d of its %d files at their newest version or fewer\n",
				p.Origin.Short(), p.AsOf.UTC().Format(time.RFC3339), p.Found, p.Files)
		}
		if p.After > 0 {
			fmt.Fprintf(w, "warning: %d records of device %s came after its last checkpoint (%s): nothing proves the receiver holds all of them\n",
				p.After, p.Origin.Short(), p.AsOf.UTC().Format(time.RFC3339))
		}
	}
}

// loadOrInitIdentity loads the home's identity, initialising the home as
// 'lockstep init' does when it has none.
func loadOrInitIdentity(g *globals) (*crypt.Identity, error) {
	dir, err := home.Resolve(g.home)
	if err != nil {
		return nil, err
	}
	id, err := crypt.LoadIdentity(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if _, err := initHome(dir, ""); err != nil {
			return nil, err
		}
		id, err = crypt.LoadIdentity(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("identity in %s: %w", dir, err)
	}
	return id, nil
}

// progressPrinter shows recovery progress on stderr: one line redrawn in
// place on a terminal, else a line at most every 2 s.
type progressPrinter struct {
	w        io.Writer
	verb     string // "recovering", "restoring"
	noun     string // what Progress.Files counts; "files" when empty
	folder   string
	terminal bool
	last     time.Time
	drawn    bool // a terminal line is open
	final    restore.Progress
	shown    restore.Progress // the last state printed
}

func newProgressPrinter(w io.Writer, verb, folder string) *progressPrinter {
	terminal := false
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			terminal = true
		}
	}
	return &progressPrinter{w: w, verb: verb, folder: folder, terminal: terminal}
}

// print shows p; restore calls it at most every ~200 ms and once at the end.
func (pp *progressPrinter) print(p restore.Progress) {
	pp.final = p
	line := pp.line(p)
	if pp.terminal {
		fmt.Fprintf(pp.w, "\r%s %s\x1b[K", progressBar(p), line)
		pp.drawn = true
		return
	}
	if time.Since(pp.last) >= 2*time.Second {
		pp.last, pp.shown = time.Now(), p
		fmt.Fprintln(pp.w, line)
	}
}

// end finishes the progress output: ends the terminal line, or prints the
// final state if the last line printed was older.
func (pp *progressPrinter) end() {
	switch {
	case pp.drawn:
		fmt.Fprintln(pp.w)
	case !pp.terminal && pp.final != pp.shown:
		fmt.Fprintln(pp.w, pp.line(pp.final))
	}
}

func (pp *progressPrinter) line(p restore.Progress) string {
	pct := 100
	switch {
	case p.BytesTotal > 0:
		pct = int(p.Bytes * 100 / p.BytesTotal)
	case p.FilesTotal > 0:
		pct = p.Files * 100 / p.FilesTotal
	}
	noun := pp.noun
	if noun == "" {
		noun = "files"
	}
	return fmt.Sprintf("%s %s: %d/%d %s, %.1f/%.1f MiB (%d%%)", pp.verb, pp.folder, p.Files, p.FilesTotal, noun,
		float64(p.Bytes)/(1<<20), float64(p.BytesTotal)/(1<<20), pct)
}

// mib formats n bytes in MiB with one decimal.
func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
