package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"lockstep/web"
)

func newFolder(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "folder", Short: "Manage synced folders"}
	var label, typ, passwordFile, newPasswordFile string
	var asJSON bool
	add := &cobra.Command{
		Use:   "add ID PATH",
		Short: "Add a folder (PATH is created if missing)",
		Args:  cobra.ExactArgs(2),
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
			if err := cl.Do(c.Context(), http.MethodPost, "/rest/folders", req, nil); err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), "added folder", args[0], "at", path)
			return nil
		},
	}
	add.Flags().StringVar(&label, "label", "", "a label for the folder")
	add.Flags().StringVar(&typ, "type", "sendreceive", "sendreceive, sendonly, receiveonly or encrypted")

	share := &cobra.Command{
		Use:   "share ID DEVICE",
		Short: "Share a folder with a device (untrusted devices need --password-file)",
		Args:  cobra.ExactArgs(2),
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
			if newPasswordFile != "" {
				if passwordFile == "" {
					return fmt.Errorf("--new-password-file needs the current password in --password-file")
				}
				if req.NewPassword, err = readPassword(newPasswordFile); err != nil {
					return err
				}
			}
			if err := cl.Do(c.Context(), http.MethodPost, "/rest/folders/"+pathEscape(args[0])+"/share", req, nil); err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), "shared", args[0], "with", args[1])
			return nil
		},
	}
	share.Flags().StringVar(&passwordFile, "password-file", "", "file holding the folder password (for untrusted devices)")
	share.Flags().StringVar(&newPasswordFile, "new-password-file", "", "change the folder password on the untrusted device to the one in this file")

	list := &cobra.Command{
		Use:   "list",
		Short: "List folders",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			var folders []web.FolderStatus
			if err := cl.Do(c.Context(), http.MethodGet, "/rest/folders", nil, &folders); err != nil {
				return err
			}
			if asJSON {
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
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	remove := &cobra.Command{
		Use:   "remove ID",
		Short: "Stop syncing a folder (its files stay on disk)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return simplePost(c, g, http.MethodDelete, "/rest/folders/"+pathEscape(args[0]), "removed folder "+args[0])
		},
	}
	allow := &cobra.Command{
		Use:   "allow-deletes ID",
		Short: "Let a folder that stopped before a mass deletion go on",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return simplePost(c, g, http.MethodPost, "/rest/folders/"+pathEscape(args[0])+"/allow-deletes", "folder "+args[0]+" goes on")
		},
	}
	c.AddCommand(add, share, list, remove, allow, newVersioning(g), newRetention(g))
	return c
}

func newScan(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "scan ID",
		Short: "Rescan a folder now",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return simplePost(c, g, http.MethodPost, "/rest/folders/"+pathEscape(args[0])+"/scan", "scanning "+args[0])
		},
	}
}

func simplePost(c *cobra.Command, g *globals, method, path, msg string) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	if err := cl.Do(c.Context(), method, path, nil, nil); err != nil {
		return err
	}
	fmt.Fprintln(c.OutOrStdout(), msg)
	return nil
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
