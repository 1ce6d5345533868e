package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"lockstep/crypt"
	"lockstep/storage/home"
)

func newInit(g *globals) *cobra.Command {
	var name string
	c := &cobra.Command{
		Use:   "init",
		Short: "Create this device's identity and database if missing; print the device ID",
		Example: "  lockstep init --name laptop\n" +
			"  lockstep --home /srv/lockstep init --name nas",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			dir, err := home.Resolve(g.home)
			if err != nil {
				return err
			}
			id, err := initHome(dir, name)
			if err != nil {
				return err
			}
			return emit(c, identityJSON{Home: dir, DeviceID: id.String()}, func(w io.Writer) {
				fmt.Fprintln(w, "home:", dir)
				fmt.Fprintln(w, id)
			})
		},
	}
	c.Flags().StringVar(&name, "name", "", "device name (default: the host name)")
	jsonFlag(c)
	return c
}

// identityJSON is what `init --json` and `id --json` print.
type identityJSON struct {
	Home     string `json:"home"`
	DeviceID string `json:"deviceID"`
}

func newID(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:     "id",
		Short:   "Print this device's ID",
		Example: "  lockstep id\n  lockstep --home /srv/lockstep id",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			dir, err := home.Resolve(g.home)
			if err != nil {
				return err
			}
			id, err := crypt.LoadIdentity(dir)
			if err != nil {
				return fmt.Errorf("no identity in %s (run 'lockstep init'): %w", dir, err)
			}
			return emit(c, identityJSON{Home: dir, DeviceID: id.ID.String()}, func(w io.Writer) { fmt.Fprintln(w, id.ID) })
		},
	}
	jsonFlag(c)
	return c
}
