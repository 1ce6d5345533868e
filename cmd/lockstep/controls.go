package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"lockstep/web"
)

// The everyday controls of folders and devices (web/controls.go): added
// to the folder and device commands, and --all to scan.

// addControls adds the controls' subcommands to root's folder, device and
// scan commands.
func addControls(root *cobra.Command, g *globals) {
	for _, c := range root.Commands() {
		switch c.Name() {
		case "folder":
			c.AddCommand(
				folderPause(g, true), folderPause(g, false),
				folderType(g), folderUnshare(g), folderIgnores(g),
				folderNeeded(g), folderChanges(g), folderCheck(g),
			)
		case "device":
			c.AddCommand(devicePause(g, true), devicePause(g, false), deviceRename(g))
		case "scan":
			scanAll(c, g)
		}
	}
}

// controlDone is the --json result of a control: what it did, to which
// folder or device.
type controlDone struct {
	Action string `json:"action"`
	Folder string `json:"folder,omitempty"`
	Device string `json:"device,omitempty"`
	Name   string `json:"name,omitempty"`
	Type   string `json:"type,omitempty"`
}

// control sends a request with body (nil for none) and prints msg, or
// done as JSON with --json.
func control(c *cobra.Command, g *globals, method, path string, body any, done controlDone, msg string) error {
	cl, err := g.client()
	if err != nil {
		return err
	}
	if err := cl.Do(c.Context(), method, path, body, nil); err != nil {
		return err
	}
	return emit(c, done, func(w io.Writer) { fmt.Fprintln(w, msg) })
}

// scanAll lets scan rescan every folder with --all.
func scanAll(scan *cobra.Command, g *globals) {
	var all bool
	one := scan.RunE
	scan.Use = "scan ID | scan --all"
	scan.Short = "Rescan a folder, or every folder, now"
	scan.Example = "  lockstep scan docs\n  lockstep scan --all"
	scan.Flags().BoolVar(&all, "all", false, "rescan every folder")
	jsonFlag(scan)
	scan.Args = func(c *cobra.Command, args []string) error {
		switch {
		case all && len(args) > 0:
			return usageError(c, "give a folder ID or --all, not both")
		case !all && len(args) != 1:
			return usageError(c, "give the ID of the folder to rescan, or --all")
		}
		return nil
	}
	scan.RunE = func(c *cobra.Command, args []string) error {
		if !all {
			return one(c, args)
		}
		return control(c, g, http.MethodPost, "/rest/scan", nil, controlDone{Action: "scanning"}, "scanning every folder")
	}
}

func folderPause(g *globals, pause bool) *cobra.Command {
	verb, short, example := "resume", "Resume a paused folder", "  lockstep folder resume docs"
	if pause {
		verb, short, example = "pause", "Pause a folder: no scans, no pulls, nothing sent until it is resumed (kept across restarts)", "  lockstep folder pause docs"
	}
	c := &cobra.Command{
		Use:               verb + " ID",
		Short:             short,
		Example:           example,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, completeFolders),
		RunE: func(c *cobra.Command, args []string) error {
			return control(c, g, http.MethodPost, "/rest/folders/"+pathEscape(args[0])+"/"+verb, nil,
				controlDone{Action: verb + "d", Folder: args[0]}, "folder "+args[0]+" "+verb+"d")
		},
	}
	jsonFlag(c)
	return c
}

func folderType(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "type ID sendreceive|sendonly|receiveonly",
		Short: "Change how a folder syncs",
		Long: "Change how a folder syncs: sendreceive (both ways), sendonly (its changes go out, others' are not\n" +
			"taken) or receiveonly (others' changes come in; its own stay here). Changes made while it was\n" +
			"receive-only go out once it is of another type.",
		Example:           "  lockstep folder type photos receiveonly",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeArgs(g, completeFolders, completeTypes),
		RunE: func(c *cobra.Command, args []string) error {
			return control(c, g, http.MethodPut, "/rest/folders/"+pathEscape(args[0])+"/type", web.FolderType{Type: args[1]},
				controlDone{Action: "changed", Folder: args[0], Type: args[1]}, "folder "+args[0]+" is now "+args[1])
		},
	}
	jsonFlag(c)
	return c
}

func folderUnshare(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:               "unshare ID DEVICE",
		Short:             "Stop sharing a folder with a device (the files stay on both)",
		Example:           "  lockstep folder unshare docs MFZWI3D-BONSGYC-...",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeArgs(g, completeFolders, completeDevices),
		RunE: func(c *cobra.Command, args []string) error {
			return control(c, g, http.MethodDelete, "/rest/folders/"+pathEscape(args[0])+"/share/"+pathEscape(args[1]), nil,
				controlDone{Action: "unshared", Folder: args[0], Device: args[1]}, "folder "+args[0]+" is no longer shared with "+args[1])
		},
	}
	jsonFlag(c)
	return c
}

func folderIgnores(g *globals) *cobra.Command {
	var setFile string
	c := &cobra.Command{
		Use:   "ignores ID [--set-file FILE]",
		Short: "Print a folder's ignore patterns (.lockstepignore), or replace them",
		Long: "Print a folder's ignore patterns, or with --set-file replace them with the file's content\n" +
			"('-' reads standard input). The patterns are checked first, written atomically, and the\n" +
			"folder is rescanned so they take effect.",
		Example:           "  lockstep folder ignores docs\n  printf '*.tmp\\nbuild/\\n' | lockstep folder ignores docs --set-file -",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, completeFolders),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			path := "/rest/folders/" + pathEscape(args[0]) + "/ignores"
			if setFile == "" {
				var out web.Ignores
				if err := cl.Do(c.Context(), http.MethodGet, path, nil, &out); err != nil {
					return err
				}
				if wantJSON(c) {
					return printJSON(c.OutOrStdout(), out)
				}
				_, err := io.WriteString(c.OutOrStdout(), out.Text)
				return err
			}
			var b []byte
			if setFile == "-" {
				b, err = io.ReadAll(io.LimitReader(c.InOrStdin(), 1<<20+1))
			} else {
				b, err = os.ReadFile(setFile)
			}
			if err != nil {
				return fmt.Errorf("reading the patterns: %w", err)
			}
			if err := cl.Do(c.Context(), http.MethodPut, path, web.Ignores{Text: string(b)}, nil); err != nil {
				return err
			}
			if wantJSON(c) {
				return printJSON(c.OutOrStdout(), controlDone{Action: "saved", Folder: args[0]})
			}
			fmt.Fprintln(c.OutOrStdout(), "saved the ignore patterns of", args[0]+"; rescanning")
			return nil
		},
	}
	c.Flags().StringVar(&setFile, "set-file", "", "replace the patterns with this file's content ('-': standard input)")
	jsonFlag(c)
	return c
}

func folderNeeded(g *globals) *cobra.Command {
	var limit int
	c := &cobra.Command{
		Use:               "needed ID",
		Short:             "List what a folder does not have yet as the other devices do, and why each item is stuck",
		Example:           "  lockstep folder needed docs\n  lockstep folder needed docs --limit 10 --json",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, completeFolders),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			path := "/rest/folders/" + pathEscape(args[0]) + "/needed"
			if limit > 0 {
				path += "?limit=" + strconv.Itoa(limit)
			}
			var out web.NeededList
			if err := cl.Do(c.Context(), http.MethodGet, path, nil, &out); err != nil {
				return err
			}
			if wantJSON(c) {
				return printJSON(c.OutOrStdout(), out)
			}
			if out.Total == 0 {
				fmt.Fprintln(c.OutOrStdout(), "folder", args[0], "is in sync")
				return nil
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tCHANGE\tFROM\tWHY")
			for _, it := range out.Items {
				from := it.DeviceName
				if from == "" {
					from = shortID(it.Device)
				}
				fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\n", printable(it.Name), it.Action, it.Type, printable(from), printable(it.Reason))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if out.Total > len(out.Items) {
				fmt.Fprintf(c.OutOrStdout(), "... and %d more\n", out.Total-len(out.Items))
			}
			return nil
		},
	}
	c.Flags().IntVar(&limit, "limit", 0, "list at most this many items (default and most: 1000)")
	jsonFlag(c)
	return c
}

func folderChanges(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:               "changes ID",
		Short:             "List a folder's recent changes, newest first: when, what, and which device made them",
		Example:           "  lockstep folder changes docs",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, completeFolders),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			var out web.ChangeList
			if err := cl.Do(c.Context(), http.MethodGet, "/rest/folders/"+pathEscape(args[0])+"/changes", nil, &out); err != nil {
				return err
			}
			if wantJSON(c) {
				return printJSON(c.OutOrStdout(), out)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TIME\tNAME\tCHANGE\tBY")
			for _, ch := range out.Changes {
				by := ch.DeviceName
				if by == "" {
					by = shortID(ch.Device)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s\n", ch.Time.Local().Format("2006-01-02 15:04:05"), printable(ch.Name), ch.Action, ch.Type, printable(by))
			}
			return tw.Flush()
		},
	}
	jsonFlag(c)
	return c
}

// completeTypes offers the types a synced folder can take.
func completeTypes(context.Context, *web.Client) []string {
	return []string{"sendreceive\tboth ways", "sendonly\tits changes go out, others' are not taken", "receiveonly\tothers' changes come in, its own stay"}
}

// shortID is the first group of a device ID, "-" for none.
func shortID(id string) string {
	if id == "" {
		return "-"
	}
	for i, r := range id {
		if r == '-' {
			return id[:i]
		}
	}
	return id
}

func devicePause(g *globals, pause bool) *cobra.Command {
	verb, short := "resume", "Resume a paused device: it is dialled and let in again"
	if pause {
		verb, short = "pause", "Pause a device: drop its connection, neither dial it nor let it in until resumed (kept across restarts)"
	}
	c := &cobra.Command{
		Use:               verb + " ID",
		Short:             short,
		Example:           "  lockstep device " + verb + " MFZWI3D-BONSGYC-...",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, completeDevices),
		RunE: func(c *cobra.Command, args []string) error {
			return control(c, g, http.MethodPost, "/rest/devices/"+pathEscape(args[0])+"/"+verb, nil,
				controlDone{Action: verb + "d", Device: args[0]}, "device "+args[0]+" "+verb+"d")
		},
	}
	jsonFlag(c)
	return c
}

func deviceRename(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:               "rename ID NAME",
		Short:             "Change the name this device knows a device by",
		Example:           "  lockstep device rename MFZWI3D-BONSGYC-... 'old laptop'",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completeArgs(g, completeDevices),
		RunE: func(c *cobra.Command, args []string) error {
			return control(c, g, http.MethodPut, "/rest/devices/"+pathEscape(args[0])+"/name", web.RenameDevice{Name: args[1]},
				controlDone{Action: "renamed", Device: args[0], Name: args[1]}, "device "+args[0]+" is now called "+args[1])
		},
	}
	jsonFlag(c)
	return c
}
