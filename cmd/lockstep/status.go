package main

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/spf13/cobra"

	"lockstep/web"
)

func newStatus(g *globals) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "status",
		Short: "Show this node's folders and devices",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			var st web.Status
			if err := cl.Do(c.Context(), http.MethodGet, "/rest/status", nil, &st); err != nil {
				return err
			}
			if asJSON {
				return printJSON(c.OutOrStdout(), st)
			}
			w := c.OutOrStdout()
			fmt.Fprintln(w, "device", st.DeviceID)
			for _, f := range st.Folders {
				fmt.Fprintf(w, "folder %s (%s): %s, %d/%d files, need %d\n", printable(f.ID), f.Type, f.State, f.LocalFiles, f.GlobalFiles, f.NeedFiles)
				if f.Error != "" {
					fmt.Fprintln(w, "  error:", printable(f.Error))
				}
			}
			for _, d := range st.Devices {
				state := "disconnected"
				if d.Connected {
					state = "connected " + d.Address
					if d.Connection != "" {
						state += " (" + d.Connection + ")"
					}
				}
				fmt.Fprintf(w, "device %s %s: %s\n", d.ID, strconv.QuoteToGraphic(d.Name), state)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}
