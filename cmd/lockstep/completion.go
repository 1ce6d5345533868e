package main

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"lockstep/web"
)

// A completer offers the values of one argument, each "VALUE\tDESCRIPTION"
// as cobra's shell scripts take them, from the running node's REST API.
type completer func(ctx context.Context, cl *web.Client) []string

// completeArgs completes the i-th argument with the i-th completer; an
// argument beyond them gets nothing. Without a daemon there is nothing
// to offer, and no files either: none of these arguments is a file.
func completeArgs(g *globals, each ...completer) cobra.CompletionFunc {
	return func(c *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) >= len(each) || each[len(args)] == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		cl, err := g.client()
		if err != nil {
			cobra.CompDebugln(err.Error(), false)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		// A shell waits for the answer: a daemon that hangs must not hang it.
		ctx, cancel := context.WithTimeout(c.Context(), 3*time.Second)
		defer cancel()
		return each[len(args)](ctx, cl), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeFolders offers the node's folder IDs, described by label and type.
func completeFolders(ctx context.Context, cl *web.Client) []string {
	var folders []web.FolderStatus
	if err := cl.Do(ctx, http.MethodGet, "/rest/folders", nil, &folders); err != nil {
		cobra.CompDebugln(err.Error(), false)
		return nil
	}
	out := make([]string, 0, len(folders))
	for _, f := range folders {
		desc := f.Type
		if f.Label != "" && f.Label != f.ID {
			desc = f.Label + ", " + desc
		}
		out = append(out, completion(f.ID, desc))
	}
	return out
}

// completeDevices offers the known devices' IDs, described by name.
func completeDevices(ctx context.Context, cl *web.Client) []string {
	var devs []web.DeviceStatus
	if err := cl.Do(ctx, http.MethodGet, "/rest/devices", nil, &devs); err != nil {
		cobra.CompDebugln(err.Error(), false)
		return nil
	}
	out := make([]string, 0, len(devs))
	for _, d := range devs {
		desc := d.Name
		if d.Untrusted {
			desc += " (untrusted)"
		}
		out = append(out, completion(d.ID, desc))
	}
	return out
}

// completePending offers the pending devices' IDs and offered folders' IDs.
func completePending(ctx context.Context, cl *web.Client) []string {
	var p web.Pending
	if err := cl.Do(ctx, http.MethodGet, "/rest/pending", nil, &p); err != nil {
		cobra.CompDebugln(err.Error(), false)
		return nil
	}
	var out []string
	for _, d := range p.Devices {
		out = append(out, completion(d.ID, strings.TrimSpace("device "+d.Name)))
	}
	for _, f := range p.Folders {
		out = append(out, completion(f.Folder, "folder offered by "+f.Device))
	}
	return out
}

// completion is one offered value with its description, kept on one line
// and free of the tab that separates them.
func completion(value, desc string) string {
	desc = strings.Join(strings.Fields(printable(desc)), " ")
	if desc == "" {
		return value
	}
	return value + "\t" + desc
}

// completeFlag offers fixed values for a flag of c.
func completeFlag(c *cobra.Command, flag string, values ...string) {
	_ = c.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
}
