package events

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// samples has one event of each type with its JSON, as the contract
// documents it: scripts rely on these field names.
var samples = []struct {
	p    Payload
	json string
}{
	{FolderStateChanged{Folder: "docs", From: "idle", State: "error", Error: "folder path missing"},
		`{"folder":"docs","from":"idle","state":"error","error":"folder path missing"}`},
	{FolderSummary{Folder: "docs"}, `{"folder":"docs"}`},
	{FolderError{Folder: "docs", Name: "a/b.txt", Error: "permission denied"},
		`{"folder":"docs","name":"a/b.txt","error":"permission denied"}`},
	{ItemStarted{Folder: "docs", Name: "a.txt", Action: "update"},
		`{"folder":"docs","name":"a.txt","action":"update"}`},
	{ItemFinished{Folder: "docs", Name: "a.txt", Action: "delete", Error: "busy"},
		`{"folder":"docs","name":"a.txt","action":"delete","error":"busy"}`},
	{ConflictCreated{Folder: "docs", Name: "a.txt", ConflictName: "a.sync-conflict-20260102-030405-ABCDEFG.txt", Device: "ABCDEFG-1"},
		`{"folder":"docs","name":"a.txt","conflictName":"a.sync-conflict-20260102-030405-ABCDEFG.txt","device":"ABCDEFG-1"}`},
	{DeviceConnected{Device: "ABCDEFG-1", Address: "tcp://192.0.2.1:22100", Connection: "lan"},
		`{"device":"ABCDEFG-1","address":"tcp://192.0.2.1:22100","connection":"lan"}`},
	{DeviceDisconnected{Device: "ABCDEFG-1", Address: "tcp://192.0.2.1:22100", Reason: "EOF"},
		`{"device":"ABCDEFG-1","address":"tcp://192.0.2.1:22100","reason":"EOF"}`},
	{DeviceDiscovered{Device: "ABCDEFG-1", Addresses: []string{"tcp://192.0.2.1:22100"}},
		`{"device":"ABCDEFG-1","addresses":["tcp://192.0.2.1:22100"]}`},
	{PendingChanged{Device: "ABCDEFG-1", Folder: "photos"}, `{"device":"ABCDEFG-1","folder":"photos"}`},
	{ReceiverProgress{Folder: "docs", Device: "ABCDEFG-1", Records: 3, Chunks: 40, Bytes: 5000},
		`{"folder":"docs","device":"ABCDEFG-1","records":3,"chunks":40,"bytes":5000}`},
}

func TestEventJSON(t *testing.T) {
	b := newBus(len(samples), fixedClock(t0))
	covered := map[Type]bool{}
	for _, s := range samples {
		b.Publish(s.p)
		covered[s.p.Type()] = true
	}
	for _, typ := range Types() {
		if !covered[typ] {
			t.Errorf("no sample of %s", typ)
		}
		if _, ok := decoders[typ]; !ok {
			t.Errorf("no decoder for %s", typ)
		}
	}
	if len(decoders) != len(Types()) {
		t.Errorf("%d decoders for %d types", len(decoders), len(Types()))
	}
	evs, err := b.Since(0)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range evs {
		s := samples[i]
		if got := reflect.TypeOf(s.p).Name(); string(e.Type) != got {
			t.Errorf("a %s payload is a %q event: the type string must be the struct's name", got, e.Type)
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"id":` + jsonString(t, e.ID) + `,"time":"2026-01-02T03:04:05Z","type":"` + string(e.Type) + `","data":` + s.json + `}`
		if string(b) != want {
			t.Errorf("%s marshals as\n%s\nwant\n%s", e.Type, b, want)
		}
		var back Event
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("decoding %s: %v", b, err)
		}
		if !reflect.DeepEqual(back, e) {
			t.Errorf("%s decodes as %+v, want %+v", b, back, e)
		}
	}
}

func jsonString(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUnmarshalUnknownType: an event of a type from a newer node decodes,
// with no data; data that does not fit its type is an error.
func TestUnmarshalUnknownType(t *testing.T) {
	var e Event
	if err := json.Unmarshal([]byte(`{"id":7,"time":"2026-01-02T03:04:05Z","type":"SomethingNew","data":{"x":1}}`), &e); err != nil {
		t.Fatal(err)
	}
	if e.ID != 7 || e.Type != "SomethingNew" || e.Data != nil || !e.Time.Equal(t0) {
		t.Errorf("decoded %+v", e)
	}
	err := json.Unmarshal([]byte(`{"id":8,"type":"FolderSummary","data":{"folder":3}}`), &e)
	if err == nil || !strings.Contains(err.Error(), "FolderSummary") {
		t.Errorf("a number for a folder name decoded with %v", err)
	}
}
