package main

import (
	"encoding/hex"
	"encoding/json"
	"io"
	"sync"

	"lockstep/sync/protocol"
)

// output writes one JSON object per line; safe for concurrent use.
type output struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func newOutput(w io.Writer) *output { return &output{enc: json.NewEncoder(w)} }

// emit writes {"event": event, fields...}.
func (o *output) emit(event string, fields map[string]any) {
	m := map[string]any{"event": event}
	for k, v := range fields {
		m[k] = v
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	_ = o.enc.Encode(m)
}

// counterJSON is one counter of a version vector; id is the device's
// short ID as a number.
type counterJSON struct {
	ID    uint64 `json:"id"`
	Value uint64 `json:"value"`
}

// recordFields is what "record" lines say of a file record the node sent.
func recordFields(folder string, fi *protocol.FileInfo) map[string]any {
	var version []counterJSON
	for _, c := range fi.GetVersion().GetCounters() {
		version = append(version, counterJSON{c.GetId(), c.GetValue()})
	}
	var hashes []string
	for _, b := range fi.GetBlocks() {
		hashes = append(hashes, hex.EncodeToString(b.GetHash()))
	}
	return map[string]any{
		"folder":      folder,
		"name":        fi.GetName(),
		"type":        fi.GetType().String(),
		"size":        fi.GetSize(),
		"permissions": fi.GetPermissions(),
		"deleted":     fi.GetDeleted(),
		"invalid":     fi.GetInvalid(),
		"sequence":    fi.GetSequence(),
		"modifiedBy":  fi.GetModifiedBy(),
		"version":     version,
		"hashes":      hashes,
	}
}
