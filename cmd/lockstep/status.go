package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"lockstep/web"
)

func newStatus(g *globals) *cobra.Command {
	c := &cobra.Command{
		Use:   "status",
		Short: "Show this node's folders and devices (on a receiver: what it stores)",
		Example: "  lockstep status\n" +
			"  lockstep status --json | jq '.folders[] | {id, state, needFiles}'",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cl, err := g.client()
			if err != nil {
				return err
			}
			var st web.Status
			if err := cl.Do(c.Context(), http.MethodGet, "/rest/status", nil, &st); err != nil {
				return err
			}
			return emit(c, st, func(w io.Writer) { printStatus(w, st) })
		},
	}
	jsonFlag(c)
	return c
}

// printStatus writes st for a person: every folder, and for a folder this
// node holds as a receiver what it stores and when each device it holds
// the folder for was last in touch; then every device.
func printStatus(w io.Writer, st web.Status) {
	names := map[string]string{}
	for _, d := range st.Devices {
		names[d.ID] = d.Name
	}
	fmt.Fprintln(w, "device", st.DeviceID)
	for _, f := range st.Folders {
		if r := f.Receiver; r != nil {
			fmt.Fprintf(w, "folder %s (%s, held for others as a receiver): %s, %d records of %d files, %d chunks, %s stored\n",
				printable(f.ID), f.Type, f.State, r.Records, r.Files, r.Chunks, byteSize(r.StoredBytes))
		} else {
			fmt.Fprintf(w, "folder %s (%s): %s, %d/%d files, need %d\n", printable(f.ID), f.Type, f.State, f.LocalFiles, f.GlobalFiles, f.NeedFiles)
		}
		if f.Error != "" {
			fmt.Fprintln(w, "  error:", printable(f.Error))
		}
		if f.Receiver == nil {
			continue
		}
		for _, p := range f.Peers {
			fmt.Fprintf(w, "  for device %s %s: last contact %s, last stored %s\n",
				p.Device, strconv.QuoteToGraphic(names[p.Device]), when(p.LastContact, p.Connected), when(p.LastStored, false))
		}
	}
	if u := st.StoreUsage; u != nil && holdsEncrypted(st) {
		fmt.Fprintf(w, "store %s since %s: PUT %d (%s), GET %d (%s), HEAD %d, LIST %d, DELETE %d requests\n",
			st.Store, u.Since.Local().Format(time.DateTime), u.Put.Requests, byteSize(u.Put.Bytes), u.Get.Requests, byteSize(u.Get.Bytes),
			u.Head.Requests, u.List.Requests, u.Delete.Requests)
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
}

// when is a time for a person: "now" while connected, "never" when unset.
func when(t *time.Time, now bool) string {
	switch {
	case now:
		return "now (connected)"
	case t == nil || t.IsZero():
		return "never"
	}
	return t.Local().Format(time.DateTime)
}

// byteSize formats n bytes with a binary unit.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// holdsEncrypted reports whether the node holds a folder for others: its
// blob store is then worth showing.
func holdsEncrypted(st web.Status) bool {
	for _, f := range st.Folders {
		if f.Receiver != nil {
			return true
		}
	}
	return false
}
