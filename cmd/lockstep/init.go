package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"lockstep/crypt"
	"lockstep/storage/home"
)

func newInit(g *globals) *cobra.Command {
	var name string
	c := &cobra.Command{
		Use:   "init",
		Short: "Create this device's identity and database if missing; print the device ID",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			dir, err := home.Resolve(g.home)
			if err != nil {
				return err
			}
			id, err := initHome(dir, name)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.OutOrStdout(), "home:", dir)
			fmt.Fprintln(c.OutOrStdout(), id)
			return nil
		},
	}
	c.Flags().StringVar(&name, "name", "", "device name (default: the host name)")
	return c
}

func newID(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "id",
		Short: "Print this device's ID",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			dir, err := home.Resolve(g.home)
			if err != nil {
				return err
			}
			id, err := crypt.LoadIdentity(dir)
			if err != nil {
				return fmt.Errorf("no identity in %s (run 'lockstep init'): %w", dir, err)
			}
			fmt.Fprintln(c.OutOrStdout(), id.ID)
			return nil
		},
	}
}
