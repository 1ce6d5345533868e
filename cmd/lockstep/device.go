package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"lockstep/crypt"
	"lockstep/web"
)

func newDevice(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "device",
		Short: "Manage known devices",
		Example: "  lockstep device add DEVICE-ID --name laptop\n" +
			"  lockstep device list\n" +
			"  lockstep device remove DEVICE-ID",
	}
	var (
		name      string
		addresses []string
		untrusted bool
		trusted   bool
		yes       bool
	)
	add := &cobra.Command{
		Use:   "add ID",
		Short: "Add a device, or update a known one's name and addresses (its trust stays: see 'device set')",
		Example: "  lockstep device add DEVICE-ID --name laptop\n" +
			"  lockstep device add DEVICE-ID --name nas --address tcp://nas.lan:22100\n" +
			"  # a receiver that gets only encrypted data\n" +
			"  lockstep device add DEVICE-ID --name vps --address tcp://vps.example.org:22100 --untrusted",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, completeDevices),
		RunE: func(c *cobra.Command, args []string) error {
			if trusted && untrusted {
				return usageError(c, "give --trusted or --untrusted, not both")
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			var out web.DeviceStatus
			req := web.AddDevice{ID: args[0], Name: name, Addresses: addresses, Untrusted: untrusted, Trusted: trusted}
			if err := cl.Do(c.Context(), http.MethodPost, "/rest/devices", req, &out); err != nil {
				return err
			}
			return emit(c, out, func(w io.Writer) { fmt.Fprintln(w, "added", out.ID) })
		},
	}
	jsonFlag(add)
	add.Flags().StringVar(&name, "name", "", "a name for the device")
	add.Flags().StringArrayVar(&addresses, "address", nil, "tcp://HOST:PORT to dial (repeatable; default dynamic)")
	add.Flags().BoolVar(&untrusted, "untrusted", false, "the device is an untrusted receiver: it gets only encrypted data")
	add.Flags().BoolVar(&trusted, "trusted", false, "the device is trusted (the default for a new device): it gets plaintext")

	set := &cobra.Command{
		Use:   "set ID --trusted|--untrusted",
		Short: "Change a known device's trust",
		Long: "Make a known device trusted (it gets the plaintext of the folders shared with it) or\n" +
			"untrusted (it gets only encrypted data). A device that was ever untrusted on this node\n" +
			"becomes trusted only with --yes.",
		Example: "  lockstep device set DEVICE-ID --untrusted\n" +
			"  lockstep device set DEVICE-ID --trusted --yes",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, completeDevices),
		RunE: func(c *cobra.Command, args []string) error {
			if trusted == untrusted {
				return usageError(c, "give one of --trusted or --untrusted")
			}
			cl, err := g.client()
			if err != nil {
				return err
			}
			var out web.TrustChanged
			req := web.SetTrust{Untrusted: &untrusted, Confirm: yes}
			if err := cl.Do(c.Context(), http.MethodPut, "/rest/devices/"+pathEscape(args[0])+"/trust", req, &out); err != nil {
				return err
			}
			return reportTrust(c, out)
		},
	}
	set.Flags().BoolVar(&trusted, "trusted", false, "make the device trusted: it gets plaintext")
	set.Flags().BoolVar(&untrusted, "untrusted", false, "make the device an untrusted receiver: it gets only encrypted data")
	set.Flags().BoolVar(&yes, "yes", false, "confirm that a device that was untrusted may get plaintext")
	jsonFlag(set)

	list := &cobra.Command{
		Use:     "list",
		Short:   "List known devices",
		Example: "  lockstep device list\n  lockstep device list --json | jq -r '.[] | select(.connected) | .name'",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			var devs []web.DeviceStatus
			if err := cl.Do(c.Context(), http.MethodGet, "/rest/devices", nil, &devs); err != nil {
				return err
			}
			if wantJSON(c) {
				return printJSON(c.OutOrStdout(), devs)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tCONNECTED\tVIA\tTRUST")
			for _, d := range devs {
				trust := "trusted"
				if d.Untrusted {
					trust = "untrusted"
				}
				via := "-"
				if d.Connected {
					via = d.Connection
				}
				if d.Paused {
					via = "paused"
				}
				fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\n", d.ID, printable(d.Name), d.Connected, via, trust)
			}
			return tw.Flush()
		},
	}
	jsonFlag(list)

	nearby := &cobra.Command{
		Use:     "nearby",
		Short:   "List devices announcing themselves on the LAN that are not added yet",
		Example: "  lockstep device nearby\n  lockstep device add $(lockstep device nearby --json | jq -r '.[0].id')",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			var st web.DiscoveryStatus
			if err := cl.Do(c.Context(), http.MethodGet, "/rest/discovery", nil, &st); err != nil {
				return err
			}
			if wantJSON(c) {
				return printJSON(c.OutOrStdout(), st.Nearby)
			}
			if !st.LocalDiscovery {
				fmt.Fprintln(c.ErrOrStderr(), "local discovery is off (serve --no-local-discovery)")
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tADDRESSES\tLAST SEEN")
			for _, d := range st.Nearby {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", d.ID, strings.Join(d.Addresses, " "), d.LastSeen.Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	jsonFlag(nearby)

	remove := &cobra.Command{
		Use:               "remove ID",
		Short:             "Forget a device, drop its connection and stop sharing every folder with it",
		Example:           "  lockstep device remove DEVICE-ID",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, completeDevices),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			if err := cl.Do(c.Context(), http.MethodDelete, "/rest/devices/"+pathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			return emit(c, changed{Action: "removed", Device: args[0]}, func(w io.Writer) { fmt.Fprintln(w, "removed", args[0]) })
		},
	}
	jsonFlag(remove)
	c.AddCommand(add, set, list, nearby, remove)
	return c
}

// reportTrust says what a trust change did, with a warning on stderr of
// what it means for the folders shared with the device.
func reportTrust(c *cobra.Command, out web.TrustChanged) error {
	d := out.Device
	trust := "trusted"
	if d.Untrusted {
		trust = "untrusted"
	}
	if !out.Changed {
		return emit(c, out, func(w io.Writer) { fmt.Fprintf(w, "device %s is %s already\n", d.ID, trust) })
	}
	folders := "none yet"
	if len(out.Folders) > 0 {
		folders = strings.Join(out.Folders, ", ")
	}
	if d.Untrusted {
		fmt.Fprintf(c.ErrOrStderr(), "note: device %s now gets only encrypted data; share its folders (%s) again with --password-file to back them up there\n", d.ID, folders)
	} else {
		fmt.Fprintf(c.ErrOrStderr(), "warning: device %s now gets the plaintext of every folder shared with it (%s)\n", d.ID, folders)
	}
	return emit(c, out, func(w io.Writer) { fmt.Fprintf(w, "device %s is now %s\n", d.ID, trust) })
}

func newPending(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "pending",
		Short: "List devices and folder offers waiting for acceptance",
		Example: "  lockstep pending\n" +
			"  lockstep pending accept DEVICE-ID\n" +
			"  lockstep pending accept docs --path ~/Documents",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			var p web.Pending
			if err := cl.Do(c.Context(), http.MethodGet, "/rest/pending", nil, &p); err != nil {
				return err
			}
			if wantJSON(c) {
				return printJSON(c.OutOrStdout(), p)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KIND\tID\tFROM\tLAST SEEN")
			for _, d := range p.Devices {
				fmt.Fprintf(tw, "device\t%s\t%s\t%s\n", d.ID, d.Address, d.LastSeen.Local().Format("2006-01-02 15:04:05"))
			}
			for _, f := range p.Folders {
				fmt.Fprintf(tw, "folder\t%s\t%s\t%s\n", printable(f.Folder), f.Device, f.FirstSeen.Local().Format("2006-01-02 15:04:05"))
			}
			return tw.Flush()
		},
	}
	jsonFlag(c)
	var path string
	accept := &cobra.Command{
		Use:   "accept DEVICE|FOLDER",
		Short: "Accept a pending device or folder offer",
		Example: "  lockstep pending accept DEVICE-ID\n" +
			"  lockstep pending accept docs --path ~/Documents",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeArgs(g, completePending),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			if path != "" {
				if path, err = filepath.Abs(path); err != nil {
					return err
				}
			}
			if err := cl.Do(c.Context(), http.MethodPost, "/rest/pending/accept", web.Accept{ID: args[0], Path: path}, nil); err != nil {
				return err
			}
			return emit(c, changed{Action: "accepted", Folder: folderOf(args[0]), Device: deviceOf(args[0])}, func(w io.Writer) { fmt.Fprintln(w, "accepted", args[0]) })
		},
	}
	accept.Flags().StringVar(&path, "path", "", "where an accepted folder goes (default ~/Sync/ID)")
	jsonFlag(accept)
	c.AddCommand(accept)
	return c
}

// deviceOf is id when it is a device ID, else "" (pending accept takes a
// device ID or a folder ID).
func deviceOf(id string) string {
	if _, err := crypt.ParseDeviceID(id); err == nil {
		return id
	}
	return ""
}

// folderOf is id when it is not a device ID.
func folderOf(id string) string {
	if deviceOf(id) != "" {
		return ""
	}
	return id
}
