package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"lockstep/web"
)

func newDevice(g *globals) *cobra.Command {
	c := &cobra.Command{Use: "device", Short: "Manage known devices"}
	var (
		name      string
		addresses []string
		untrusted bool
		asJSON    bool
	)
	add := &cobra.Command{
		Use:   "add ID",
		Short: "Add or update a device",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			var out web.DeviceStatus
			req := web.AddDevice{ID: args[0], Name: name, Addresses: addresses, Untrusted: untrusted}
			if err := cl.Do(c.Context(), http.MethodPost, "/rest/devices", req, &out); err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), "added", out.ID)
			return nil
		},
	}
	add.Flags().StringVar(&name, "name", "", "a name for the device")
	add.Flags().StringArrayVar(&addresses, "address", nil, "tcp://HOST:PORT to dial (repeatable; default dynamic)")
	add.Flags().BoolVar(&untrusted, "untrusted", false, "the device is an untrusted receiver: it gets only encrypted data")

	list := &cobra.Command{
		Use:   "list",
		Short: "List known devices",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			var devs []web.DeviceStatus
			if err := cl.Do(c.Context(), http.MethodGet, "/rest/devices", nil, &devs); err != nil {
				return err
			}
			if asJSON {
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
				fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\n", d.ID, d.Name, d.Connected, via, trust)
			}
			return tw.Flush()
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	nearby := &cobra.Command{
		Use:   "nearby",
		Short: "List devices announcing themselves on the LAN that are not added yet",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			var st web.DiscoveryStatus
			if err := cl.Do(c.Context(), http.MethodGet, "/rest/discovery", nil, &st); err != nil {
				return err
			}
			if asJSON {
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
	nearby.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	remove := &cobra.Command{
		Use:   "remove ID",
		Short: "Forget a device and drop its connection",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			if err := cl.Do(c.Context(), http.MethodDelete, "/rest/devices/"+pathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), "removed", args[0])
			return nil
		},
	}
	c.AddCommand(add, list, nearby, remove)
	return c
}

func newPending(g *globals) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "pending",
		Short: "List devices and folder offers waiting for acceptance",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			var p web.Pending
			if err := cl.Do(c.Context(), http.MethodGet, "/rest/pending", nil, &p); err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), p)
			}
			tw := tabwriter.NewWriter(c.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KIND\tID\tFROM\tLAST SEEN")
			for _, d := range p.Devices {
				fmt.Fprintf(tw, "device\t%s\t%s\t%s\n", d.ID, d.Address, d.LastSeen.Local().Format("2006-01-02 15:04:05"))
			}
			for _, f := range p.Folders {
				fmt.Fprintf(tw, "folder\t%s\t%s\t%s\n", f.Folder, f.Device, f.FirstSeen.Local().Format("2006-01-02 15:04:05"))
			}
			return tw.Flush()
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	var path string
	accept := &cobra.Command{
		Use:   "accept DEVICE|FOLDER",
		Short: "Accept a pending device or folder offer",
		Args:  cobra.ExactArgs(1),
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
			fmt.Fprintln(c.OutOrStdout(), "accepted", args[0])
			return nil
		},
	}
	accept.Flags().StringVar(&path, "path", "", "where an accepted folder goes (default ~/Sync/ID)")
	c.AddCommand(accept)
	return c
}
