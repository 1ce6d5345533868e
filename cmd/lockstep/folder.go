package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"lockstep/sync/engine"
	"lockstep/web"
)

func newFolder(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "folder",
		Short: "Manage synced folders",
		Example: "  lockstep folder add docs ~/Documents\n" +
			"  lockstep folder share docs DEVICE-ID\n" +
			"  lockstep folder list --json",
	}
	var label, typ, passwordFile, newPasswordFile string
	var rotateKey, wait bool
	add := &cobra.Command{
		Use:   "add ID PATH",
		Short: "Add a folder (PATH is created if missing)",
		Example: "  lockstep folder add docs ~/Documents\n" +
			"  lockstep folder add photos /srv/photos --label Photos --type sendonly\n" +
			"  # and wait for its first scan, showing its progress\n" +
			"  lockstep folder add music ~/Music --wait\n" +
			"  # on a receiver: a folder it holds encrypted for others\n" +
			"  lockstep folder add docs /srv/lockstep/docs --type encrypted",
		Args: cobra.ExactArgs(2),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			path, err := filepath.Abs(args[1])
			if err != nil {
				return err
			}
			req := web.AddFolder{ID: args[0], Path: path, Label: label, Type: typ}
			var out web.FolderStatus
			if err := cl.Do(c.Context(), http.MethodPost, "/rest/folders", req, &out); err != nil {
				return err
			}
			if wait && out.Type != "encrypted" {
				if out, err = waitScanned(c.Context(), cl, c.ErrOrStderr(), args[0]); err != nil {
					return err
				}
			}
			return emit(c, out, func(w io.Writer) { fmt.Fprintln(w, "added folder", args[0], "at", path) })
		},
	}
	add.Flags().StringVar(&label, "label", "", "a label for the folder")
	add.Flags().BoolVar(&wait, "wait", false, "wait for the folder's first scan, showing its progress; fail if the folder can't start or its scan fails")
	add.Flags().StringVar(&typ, "type", "sendreceive", "sendreceive, sendonly, receiveonly or encrypted")
	completeFlag(add, "type", "sendreceive", "sendonly", "receiveonly", "encrypted")
	add.ValidArgsFunction = func(c *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) == 1 {
			return nil, cobra.ShellCompDirectiveFilterDirs
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	jsonFlag(add)

	share := &cobra.Command{
		Use:   "share ID DEVICE",
		Short: "Share a folder with a device (untrusted devices need --password-file)",
		Example: "  lockstep folder share docs LAPTOP-ID\n" +
			"  # back up to an untrusted receiver, encrypted under a password\n" +
			"  lockstep folder share docs RECEIVER-ID --password-file ~/.docs-password\n" +
			"  # change that password on the receiver\n" +
			"  lockstep folder share docs RECEIVER-ID --password-file old.txt --new-password-file new.txt\n" +
			"  # change it on every receiver, with a new key for all that is written from now on\n" +
			"  lockstep folder share docs RECEIVER-ID --password-file old.txt --new-password-file new.txt --rotate-key",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeArgs(g, completeFolders, completeDevices),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			req := web.ShareFolder{Device: args[1]}
			if passwordFile != "" {
				if req.Password, err = readPassword(passwordFile); err != nil {
					return err
				}
			}
			req.RotateKey = rotateKey
			if rotateKey && newPasswordFile == "" {
				return usageError(c, "--rotate-key needs --password-file and --new-password-file")
			}
			if newPasswordFile != "" {
				if passwordFile == "" {
					return fmt.Errorf("--new-password-file needs the current password in --password-file")
				}
				if req.NewPassword, err = readPassword(newPasswordFile); err != nil {
					return err
				}
			}
			stop := func() {}
			if req.Password != "" {
				// The daemon derives a key from the password (scrypt,
				// about a second) and stores the sealed folder key on
				// the receiver.
				stop = waiting(c.ErrOrStderr(), "sharing "+args[0]+" with "+args[1]+": sealing the folder key under the password")
			}
			err = cl.Do(c.Context(), http.MethodPost, "/rest/folders/"+pathEscape(args[0])+"/share", req, nil)
			stop()
			if err != nil {
				return err
			}
			if rotateKey {
				return emit(c, changed{Action: "rotated", Folder: args[0]}, func(w io.Writer) {
					fmt.Fprintln(w, "rotated the key of", args[0], "on every receiver: what is written from now on opens only with the new password")
				})
			}
			return emit(c, changed{Action: "shared", Folder: args[0], Device: args[1]}, func(w io.Writer) {
				fmt.Fprintln(w, "shared", args[0], "with", args[1])
			})
		},
	}
	share.Flags().StringVar(&passwordFile, "password-file", "", "file holding the folder password (for untrusted devices)")
	share.Flags().StringVar(&newPasswordFile, "new-password-file", "", "change the folder password on the untrusted device to the one in this file")
	share.Flags().BoolVar(&rotateKey, "rotate-key", false, "with --new-password-file: a new folder key, on every receiver, for all written from now on")
	jsonFlag(share)

	list := &cobra.Command{
		Use:     "list",
		Short:   "List folders",
		Example: "  lockstep folder list\n  lockstep folder list --json | jq -r '.[].id'",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			var folders []web.FolderStatus
			if err := cl.Do(c.Context(), http.MethodGet, "/rest/folders", nil, &folders); err != nil {
				return err
			}
			if wantJSON(c) {
				return printJSON(c.OutOrStdout(), folders)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTYPE\tSTATE\tPATH\tDEVICES")
			for _, f := range folders {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", printable(f.ID), f.Type, f.State, printable(f.Path), len(f.Peers))
			}
			return tw.Flush()
		},
	}
	jsonFlag(list)

	remove := &cobra.Command{
		Use:               "remove ID",
		Short:             "Stop syncing a folder (its files stay on disk)",
		Example:           "  lockstep folder remove docs",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, completeFolders),
	}
	jsonFlag(remove)
	remove.RunE = func(c *cobra.Command, args []string) error {
		return simplePost(c, g, http.MethodDelete, "/rest/folders/"+pathEscape(args[0]),
			changed{Action: "removed", Folder: args[0]}, "removed folder "+args[0])
	}
	allow := &cobra.Command{
		Use:               "allow-deletes ID",
		Short:             "Let a folder that stopped before a mass deletion go on",
		Example:           "  lockstep folder allow-deletes docs",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, completeFolders),
	}
	jsonFlag(allow)
	allow.RunE = func(c *cobra.Command, args []string) error {
		return simplePost(c, g, http.MethodPost, "/rest/folders/"+pathEscape(args[0])+"/allow-deletes",
			changed{Action: "allowed-deletes", Folder: args[0]}, "folder "+args[0]+" goes on")
	}
	c.AddCommand(add, share, list, remove, allow, newVersioning(g), newRetention(g))
	return c
}

func newScan(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:               "scan ID",
		Short:             "Rescan a folder now",
		Example:           "  lockstep scan docs",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, completeFolders),
	}
	jsonFlag(c)
	c.RunE = func(c *cobra.Command, args []string) error {
		return simplePost(c, g, http.MethodPost, "/rest/folders/"+pathEscape(args[0])+"/scan",
			changed{Action: "scanning", Folder: args[0]}, "scanning "+args[0])
	}
	return c
}

// simplePost sends a request without a body or an answer, then prints
// msg, or res with --json.
func simplePost(c *cobra.Command, g *globals, method, path string, res changed, msg string) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	if err := cl.Do(c.Context(), method, path, nil, nil); err != nil {
		return err
	}
	return emit(c, res, func(w io.Writer) { fmt.Fprintln(w, msg) })
}

// readPassword reads a password file: its first line, without the line
// ending. An empty password is refused.
func readPassword(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading password: %w", err)
	}
	pw, _, _ := strings.Cut(string(b), "\n")
	pw = strings.TrimRight(pw, "\r")
	if pw == "" {
		return "", fmt.Errorf("password file %s is empty", path)
	}
	return pw, nil
}

// scanPoll is how often waitScanned asks how a first scan goes.
const scanPoll = 250 * time.Millisecond

// waitScanned waits until folder id has finished its first scan (its state
// is neither starting nor scanning), saying on w how far it got: redrawn
// in place on a terminal, a line every few seconds otherwise.
func waitScanned(ctx context.Context, cl *web.Client, w io.Writer, id string) (web.FolderStatus, error) {
	terminal := isTerminal(w)
	var last time.Time
	line := func(verb string, f web.FolderStatus) string {
		return fmt.Sprintf("%s %s: %d files, %d directories, %s", verb, id, f.LocalFiles, f.LocalDirectories, mib(f.LocalBytes))
	}
	for {
		var fs []web.FolderStatus
		if err := cl.Do(ctx, http.MethodGet, "/rest/folders", nil, &fs); err != nil {
			return web.FolderStatus{}, err
		}
		i := slices.IndexFunc(fs, func(f web.FolderStatus) bool { return f.ID == id })
		if i < 0 {
			return web.FolderStatus{}, fmt.Errorf("folder %s went away while it was scanned", id)
		}
		f := fs[i]
		if f.State == engine.StateError {
			return f, fmt.Errorf("folder %s: %s", id, f.Error)
		}
		if f.State != "" && f.State != engine.StateStarting && f.State != engine.StateScanning {
			if terminal {
				fmt.Fprintf(w, "\r%s\x1b[K\n", line("scanned", f))
			} else {
				fmt.Fprintln(w, line("scanned", f))
			}
			return f, nil
		}
		switch {
		case terminal:
			fmt.Fprintf(w, "\r%s\x1b[K", line("scanning", f))
		case time.Since(last) >= plainWaitAfter:
			if !last.IsZero() {
				fmt.Fprintln(w, line("scanning", f))
			}
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return web.FolderStatus{}, ctx.Err()
		case <-time.After(scanPoll):
		}
	}
}
