package web

import (
	"time"

	"lockstep/storage/blob/metered"
)

// The JSON shapes of the REST API (CONTRACT.md). The CLI decodes the same
// types, so a renamed field breaks its tests, not just its users.

// Status is GET /rest/status.
type Status struct {
	DeviceID string `json:"deviceID"`
	Store    string `json:"store,omitempty"`
	// StoreUsage counts the blob store's calls and bytes per kind (put,
	// get, head, list, delete) since the node started: with an S3 store,
	// what its bill counts.
	StoreUsage *metered.Snapshot `json:"storeUsage,omitempty"`
	// Memory is the node process's resident memory.
	Memory  *MemoryStatus  `json:"memory,omitempty"`
	Folders []FolderStatus `json:"folders"`
	Devices []DeviceStatus `json:"devices"`
	// Discovery is how this node finds devices and is found.
	Discovery *DiscoveryStatus `json:"discovery,omitempty"`
}

// MemoryStatus is a process's resident memory, in bytes.
type MemoryStatus struct {
	RSS  int64 `json:"rssBytes"`
	Peak int64 `json:"peakRssBytes"`
	// PeakOutsideKDF leaves out the peaks while scrypt ran for a
	// password (256 MiB for about a second); absent where the system
	// can't tell them apart.
	PeakOutsideKDF int64 `json:"peakRssOutsideScryptBytes,omitempty"`
}

// FolderStatus is one folder in Status.
type FolderStatus struct {
	ID          string `json:"id"`
	Label       string `json:"label,omitempty"`
	Path        string `json:"path,omitempty"`
	Type        string `json:"type"`
	State       string `json:"state"`
	Error       string `json:"error,omitempty"`
	LocalFiles  int64  `json:"localFiles"`
	LocalBytes  int64  `json:"localBytes"`
	GlobalFiles int64  `json:"globalFiles"`
	GlobalBytes int64  `json:"globalBytes"`
	NeedFiles   int64  `json:"needFiles"`
	NeedBytes   int64  `json:"needBytes"`
	// The Files counts are of files and symlinks; directories are
	// counted apart.
	LocalDirectories  int64 `json:"localDirectories"`
	GlobalDirectories int64 `json:"globalDirectories"`
	NeedDirectories   int64 `json:"needDirectories"`
	// PullBytesTotal and PullBytesDone measure the pull under way.
	PullBytesTotal int64 `json:"pullBytesTotal,omitempty"`
	PullBytesDone  int64 `json:"pullBytesDone,omitempty"`
	// PullBytesPerSecond is the pull's average rate since the node saw
	// it start, PullSecondsLeft the time left at that rate; absent until
	// the pull has been watched a moment.
	PullBytesPerSecond float64 `json:"pullBytesPerSecond,omitempty"`
	PullSecondsLeft    int64   `json:"pullSecondsLeft,omitempty"`
	// PulledBytes and ReusedBytes count, since the node started, block
	// bytes fetched from peers and those copied from local files instead.
	PulledBytes int64 `json:"pulledBytes"`
	ReusedBytes int64 `json:"reusedBytes"`
	// PulledBlocks counts the blocks of PulledBytes.
	PulledBlocks int64 `json:"pulledBlocks"`
	// HashedBytes counts, since the node started, the bytes scans read to
	// chunk and hash files.
	HashedBytes int64 `json:"hashedBytes"`
	// ResumedBytes counts, since the node started, the bytes pulls found
	// already written by a pull a crash interrupted.
	ResumedBytes int64 `json:"resumedBytes,omitempty"`
	// TamperedRecords and TamperedChunks count, since the node started,
	// records and chunks from receivers that failed verification.
	TamperedRecords int64 `json:"tamperedRecords,omitempty"`
	TamperedChunks  int64 `json:"tamperedChunks,omitempty"`
	// The restore from receivers under way.
	RestoreFiles      int64 `json:"restoreFiles,omitempty"`
	RestoreFilesTotal int64 `json:"restoreFilesTotal,omitempty"`
	RestoreBytes      int64 `json:"restoreBytes,omitempty"`
	RestoreBytesTotal int64 `json:"restoreBytesTotal,omitempty"`
	// RestoreBytesPerSecond and RestoreSecondsLeft are the restore's, as
	// for the pull.
	RestoreBytesPerSecond float64      `json:"restoreBytesPerSecond,omitempty"`
	RestoreSecondsLeft    int64        `json:"restoreSecondsLeft,omitempty"`
	Peers                 []PeerStatus `json:"peers"`
	// Receiver is set for an encrypted folder on a receiver.
	Receiver *ReceiverStatus `json:"receiver,omitempty"`
	// Check is the folder's backup check: the one under way, the last
	// result, its schedule; absent when it has none of these.
	Check *CheckState `json:"check,omitempty"`
}

// PeerStatus is a device a folder is shared with.
type PeerStatus struct {
	Device     string  `json:"device"`
	Connected  bool    `json:"connected"`
	Completion float64 `json:"completion"`
	// Untrusted: the device is an untrusted receiver of the folder.
	Untrusted bool `json:"untrusted,omitempty"`
	// Error is the latest problem with a receiver (rollback, tampering).
	Error string `json:"error,omitempty"`
	// LastContact is when the device was last connected.
	LastContact *time.Time `json:"lastContact,omitempty"`
	// LastStored is, on a receiver, when it last stored a record the
	// device sealed.
	LastStored *time.Time `json:"lastStored,omitempty"`
}

// ReceiverStatus is what a receiver stores of an encrypted folder.
type ReceiverStatus struct {
	Records         int64   `json:"records"`
	Files           int64   `json:"files"`
	Chunks          int64   `json:"chunks"`
	StoredBytes     int64   `json:"storedBytes"`
	ReferencedBytes int64   `json:"referencedBytes"`
	DedupRatio      float64 `json:"dedupRatio"`
	LogSequence     int64   `json:"logSequence"`
}

// DeviceStatus is one known device in Status and GET /rest/devices.
type DeviceStatus struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Addresses []string `json:"addresses"`
	Connected bool     `json:"connected"`
	Address   string   `json:"address,omitempty"` // of the live connection
	// Connection is how the live connection goes: "lan", "wan" or "relay".
	Connection string     `json:"connection,omitempty"`
	Untrusted  bool       `json:"untrusted"`
	LastSeen   *time.Time `json:"lastSeen,omitempty"`
	// WasUntrusted: this node held the device as untrusted at some time;
	// it becomes trusted only with a confirmation.
	WasUntrusted bool `json:"wasUntrusted,omitempty"`
	// TrustChangedAt is when the device's trust last changed.
	TrustChangedAt *time.Time `json:"trustChangedAt,omitempty"`
	// Paused: the device is neither dialled nor let in until resumed.
	Paused bool `json:"paused,omitempty"`
}

// AddDevice is the body of POST /rest/devices. Untrusted or Trusted set
// a new device's trust (trusted when neither is set); a known device
// keeps its own, and one that contradicts it is refused (409).
type AddDevice struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Addresses []string `json:"addresses"`
	Untrusted bool     `json:"untrusted"`
	Trusted   bool     `json:"trusted,omitempty"`
}

// Pending is GET /rest/pending.
type Pending struct {
	Devices []PendingDevice `json:"devices"`
	Folders []PendingFolder `json:"folders"`
}

// PendingDevice is a device that tried to connect but is not known.
type PendingDevice struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	Address   string    `json:"address"`
	FirstSeen time.Time `json:"firstSeen"`
	LastSeen  time.Time `json:"lastSeen"`
}

// PendingFolder is a folder a known device offered to share.
type PendingFolder struct {
	Device    string    `json:"device"`
	Folder    string    `json:"folder"`
	Label     string    `json:"label,omitempty"`
	FirstSeen time.Time `json:"firstSeen"`
	// Encrypted: offered to this node as an untrusted receiver.
	Encrypted bool `json:"encrypted,omitempty"`
}

// Accept is the body of POST /rest/pending/accept: a device ID or a folder
// ID. Path is where an accepted folder goes (default: the node's folder
// root joined with the folder ID).
type Accept struct {
	ID   string `json:"id"`
	Path string `json:"path,omitempty"`
}

// Error is the body of every error response.
type Error struct {
	Error string `json:"error"`
	// Kind, when set, classifies the error for scripts: KindVerification.
	Kind string `json:"kind,omitempty"`
}

// KindVerification is the Kind of an error response that means data or a
// password failed verification: a wrong password, tampered or damaged
// data from a receiver, a receiver that rolled back.
const KindVerification = "verification"

// AddFolder is the body of POST /rest/folders.
type AddFolder struct {
	ID    string `json:"id"`
	Path  string `json:"path"`
	Label string `json:"label"`
	Type  string `json:"type"`
}

// ShareFolder is the body of POST /rest/folders/{id}/share.
type ShareFolder struct {
	Device   string `json:"device"`
	Password string `json:"password,omitempty"`
	// NewPassword changes the folder's password on an untrusted receiver.
	NewPassword string `json:"newPassword,omitempty"`
	// RotateKey, with NewPassword, also gives the folder a new key for
	// everything sealed from now on, on every receiver of the folder
	// (all must be connected); Device is then any one of them.
	RotateKey bool `json:"rotateKey,omitempty"`
}

// Versioning is GET/PUT /rest/folders/{id}/versioning.
type Versioning struct {
	Type string `json:"type"`
	Keep int    `json:"keep,omitempty"`
	Days int    `json:"days,omitempty"`
}

// FileVersion is one kept version in GET /rest/folders/{id}/versions.
type FileVersion struct {
	Path    string    `json:"path"`
	Version string    `json:"version"`
	Time    time.Time `json:"time"`
	Size    int64     `json:"size"`
	Deleted bool      `json:"deleted"`
	Source  string    `json:"source"` // "local" or a receiver's device ID
}

// Restore is the body of POST /rest/folders/{id}/restore.
type Restore struct {
	Path    string `json:"path"`
	Version string `json:"version,omitempty"`
	At      string `json:"at,omitempty"` // RFC 3339
	To      string `json:"to,omitempty"`
	All     bool   `json:"all,omitempty"`
}

// Restored answers a restore: where each restored file went.
type Restored struct {
	Restored []string `json:"restored"`
}

// Retention is GET/PUT /rest/folders/{id}/retention (on a receiver).
type Retention struct {
	KeepLast        int `json:"keepLast"`
	KeepHourly      int `json:"keepHourly"`
	KeepDaily       int `json:"keepDaily"`
	KeepWeekly      int `json:"keepWeekly"`
	KeepMonthly     int `json:"keepMonthly"`
	KeepYearly      int `json:"keepYearly"`
	KeepDeletedDays int `json:"keepDeletedDays"`
}

// Prune is the body of POST /rest/folders/{id}/prune.
type Prune struct {
	DryRun bool   `json:"dryRun"`
	Grace  string `json:"grace,omitempty"` // a Go duration, default 1h
	// Policy, in a dry run on a receiver only, is a retention to try
	// instead of the folder's, before it is saved.
	Policy *Retention `json:"policy,omitempty"`
}

// Pruned answers a prune: on a receiver the versions and chunks dropped,
// on a trusted device the local versions removed.
type Pruned struct {
	DryRun   bool          `json:"dryRun"`
	Records  int           `json:"records"`
	Files    int           `json:"files"`
	Chunks   int           `json:"chunks"`
	Bytes    int64         `json:"bytes"`
	Kept     int           `json:"kept"`
	Versions []FileVersion `json:"versions,omitempty"`
}

// Ignore is the body of POST /rest/pending/ignore: a pending device's ID,
// or a folder ID whose offers are dismissed (only Device's, when given).
type Ignore struct {
	ID     string `json:"id"`
	Device string `json:"device,omitempty"`
}

// EditFolder is the body of PATCH /rest/folders/{id}.
type EditFolder struct {
	Label string `json:"label"`
}
