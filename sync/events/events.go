// Package events is the node's typed event stream: what happened to its
// folders, devices and receivers, for the console and scripts to follow
// without polling.
//
// Publishers (the sync engine, the connection router, the receiver) hand a
// payload to Bus.Publish; readers ask Bus.Since for the events after the
// last ID they saw and Bus.Wait for more. The set of payloads is closed:
// each is a struct of this package, its Go name is its Type string, and
// every one is in the REST contract (GET /rest/events).
//
// Invariants: event IDs increase by one per event, from a start taken from
// the clock when the Bus is made, so an ID from an earlier run of the node
// is never mistaken for one of this run. Publish never waits for a reader.
// A reader that asks for events the ring has dropped is told so
// (ErrFellBehind) and never silently misses one. The package starts no
// goroutines.
package events

import (
	"encoding/json"
	"fmt"
	"time"
)

// Type names a kind of event. The values are stable: scripts match on them.
type Type string

// The event types, each the name of its payload struct.
const (
	TypeFolderStateChanged Type = "FolderStateChanged"
	TypeFolderSummary      Type = "FolderSummary"
	TypeFolderError        Type = "FolderError"
	TypeItemStarted        Type = "ItemStarted"
	TypeItemFinished       Type = "ItemFinished"
	TypeConflictCreated    Type = "ConflictCreated"
	TypeDeviceConnected    Type = "DeviceConnected"
	TypeDeviceDisconnected Type = "DeviceDisconnected"
	TypeDeviceDiscovered   Type = "DeviceDiscovered"
	TypePendingChanged     Type = "PendingChanged"
	TypeReceiverProgress   Type = "ReceiverProgress"
)

// Types returns every event type, in the order of the contract.
func Types() []Type {
	return []Type{
		TypeFolderStateChanged, TypeFolderSummary, TypeFolderError,
		TypeItemStarted, TypeItemFinished, TypeConflictCreated,
		TypeDeviceConnected, TypeDeviceDisconnected, TypeDeviceDiscovered,
		TypePendingChanged, TypeReceiverProgress,
	}
}

// decoders decode each type's data into its payload struct, by value as
// it was published.
var decoders = map[Type]func([]byte) (Payload, error){
	TypeFolderStateChanged: decode[FolderStateChanged],
	TypeFolderSummary:      decode[FolderSummary],
	TypeFolderError:        decode[FolderError],
	TypeItemStarted:        decode[ItemStarted],
	TypeItemFinished:       decode[ItemFinished],
	TypeConflictCreated:    decode[ConflictCreated],
	TypeDeviceConnected:    decode[DeviceConnected],
	TypeDeviceDisconnected: decode[DeviceDisconnected],
	TypeDeviceDiscovered:   decode[DeviceDiscovered],
	TypePendingChanged:     decode[PendingChanged],
	TypeReceiverProgress:   decode[ReceiverProgress],
}

func decode[P Payload](data []byte) (Payload, error) {
	var p P
	err := json.Unmarshal(data, &p)
	return p, err
}

// Payload is what an event says: one of this package's structs, published
// by value. A payload's slices belong to the bus once published and must
// not be changed: every reader shares them.
type Payload interface {
	// Type is the payload's event type.
	Type() Type
	// payload closes the set, so that every payload is in the contract.
	payload()
}

// Event is one published payload with its place in the stream.
type Event struct {
	// ID is one more than the previous event's.
	ID   int64     `json:"id"`
	Time time.Time `json:"time"`
	Type Type      `json:"type"`
	// Data is the payload, a value of the struct named by Type; decoded
	// from JSON, nil for a type this package does not know (from a newer
	// node).
	Data Payload `json:"data"`
}

// UnmarshalJSON decodes an event, its data into the payload struct its
// type names. An unknown type is not an error (a newer node may send
// one): Data is left nil.
func (e *Event) UnmarshalJSON(b []byte) error {
	var raw struct {
		ID   int64           `json:"id"`
		Time time.Time       `json:"time"`
		Type Type            `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*e = Event{ID: raw.ID, Time: raw.Time, Type: raw.Type}
	dec, ok := decoders[raw.Type]
	if !ok {
		return nil
	}
	p, err := dec(raw.Data)
	if err != nil {
		return fmt.Errorf("decoding the data of a %s event: %w", raw.Type, err)
	}
	e.Data = p
	return nil
}

// Folder states, as in FolderStateChanged and the folder status.
const (
	StateStarting = "starting" // no scan begun since the folder was added or the node started
	StateIdle     = "idle"
	StateScanning = "scanning"
	StateSyncing  = "syncing"
	StateError    = "error"
)

// Item actions, as in ItemStarted and ItemFinished.
const (
	ActionUpdate = "update"
	ActionDelete = "delete"
)

// FolderStateChanged: a folder went from one state to another.
type FolderStateChanged struct {
	Folder string `json:"folder"`
	// From and State are StateStarting, StateIdle, StateScanning,
	// StateSyncing or StateError; a folder's first change is from
	// StateStarting.
	From  string `json:"from,omitempty"`
	State string `json:"state"`
	// Error says what is wrong when State is StateError.
	Error string `json:"error,omitempty"`
}

// FolderSummary: a folder's figures changed (its index after a scan or a
// peer's update, what it needs, a pull's progress), so its status is worth
// reading again. A publisher sends it at most about once a second per
// folder.
type FolderSummary struct {
	Folder string `json:"folder"`
}

// FolderError: something went wrong in a folder that does not stop it
// (a file that could not be pulled or scanned, a receiver that failed
// verification). A folder that stops says so in FolderStateChanged.
type FolderError struct {
	Folder string `json:"folder"`
	// Name is the file concerned, relative to the folder; empty when the
	// error is the folder's own.
	Name  string `json:"name,omitempty"`
	Error string `json:"error"`
}

// ItemStarted: the puller began to bring a file up to date.
type ItemStarted struct {
	Folder string `json:"folder"`
	Name   string `json:"name"`
	// Action is ActionUpdate or ActionDelete.
	Action string `json:"action"`
}

// ItemFinished: the puller is done with a file, successfully when Error is
// empty.
type ItemFinished struct {
	Folder string `json:"folder"`
	Name   string `json:"name"`
	// Action is ActionUpdate or ActionDelete.
	Action string `json:"action"`
	Error  string `json:"error,omitempty"`
}

// ConflictCreated: two devices changed a file concurrently; the losing
// version was kept beside it as ConflictName.
type ConflictCreated struct {
	Folder       string `json:"folder"`
	Name         string `json:"name"`
	ConflictName string `json:"conflictName"`
	// Device is the device whose change lost, and is in ConflictName.
	Device string `json:"device"`
}

// DeviceConnected: a known device's connection is up.
type DeviceConnected struct {
	Device  string `json:"device"`
	Address string `json:"address"`
	// Connection is how it goes: "lan", "wan" or "relay".
	Connection string `json:"connection,omitempty"`
}

// DeviceDisconnected: a known device's connection went down.
type DeviceDisconnected struct {
	Device  string `json:"device"`
	Address string `json:"address,omitempty"`
	// Reason is why, for a person: the error that ended it, or that this
	// node closed it.
	Reason string `json:"reason,omitempty"`
}

// DeviceDiscovered: local discovery heard a device that is not added yet.
type DeviceDiscovered struct {
	Device    string   `json:"device"`
	Addresses []string `json:"addresses"`
}

// PendingChanged: the pending list changed — an unknown device tried to
// connect, a known one offered a folder, or one of them was accepted or
// ignored. Device and Folder name what changed; Folder is empty for a
// device.
type PendingChanged struct {
	Device string `json:"device"`
	Folder string `json:"folder,omitempty"`
}

// ReceiverProgress: an upload of an encrypted folder to an untrusted
// receiver stored more. On the receiver Device is the uploading device; on
// the uploader it is the receiver. The counts are of the upload under way,
// since Device connected.
type ReceiverProgress struct {
	Folder  string `json:"folder"`
	Device  string `json:"device"`
	Records int64  `json:"records"`
	Chunks  int64  `json:"chunks"`
	Bytes   int64  `json:"bytes"`
}

func (FolderStateChanged) Type() Type { return TypeFolderStateChanged }
func (FolderSummary) Type() Type      { return TypeFolderSummary }
func (FolderError) Type() Type        { return TypeFolderError }
func (ItemStarted) Type() Type        { return TypeItemStarted }
func (ItemFinished) Type() Type       { return TypeItemFinished }
func (ConflictCreated) Type() Type    { return TypeConflictCreated }
func (DeviceConnected) Type() Type    { return TypeDeviceConnected }
func (DeviceDisconnected) Type() Type { return TypeDeviceDisconnected }
func (DeviceDiscovered) Type() Type   { return TypeDeviceDiscovered }
func (PendingChanged) Type() Type     { return TypePendingChanged }
func (ReceiverProgress) Type() Type   { return TypeReceiverProgress }

func (FolderStateChanged) payload() {}
func (FolderSummary) payload()      {}
func (FolderError) payload()        {}
func (ItemStarted) payload()        {}
func (ItemFinished) payload()       {}
func (ConflictCreated) payload()    {}
func (DeviceConnected) payload()    {}
func (DeviceDisconnected) payload() {}
func (DeviceDiscovered) payload()   {}
func (PendingChanged) payload()     {}
func (ReceiverProgress) payload()   {}
