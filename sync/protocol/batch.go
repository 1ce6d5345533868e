package protocol

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// MaxBatchSize is the encoded size of the files of one Index or
// IndexUpdate that BatchFiles aims for by default: well under MaxFrameSize,
// so one message never holds a connection for long.
const MaxBatchSize = 4 << 20

// filesField is the field number of files in Index and IndexUpdate.
const filesField = 2

// BatchFiles splits files, in order, into consecutive batches whose
// encoding as the files field of an Index or IndexUpdate takes at most
// maxBytes each (MaxBatchSize when maxBytes <= 0), and which hold at most
// MaxIndexFiles files and MaxElements elements each. The folder name adds
// a few bytes more. A single FileInfo larger than maxBytes (or of more
// than MaxElements elements) is a batch of its own. The batches share files' backing array; BatchFiles returns nil for
// no files. A full index is sent as an Index of the first batch followed by
// an IndexUpdate per further batch.
func BatchFiles(files []*FileInfo, maxBytes int) [][]*FileInfo {
	if maxBytes <= 0 {
		maxBytes = MaxBatchSize
	}
	var batches [][]*FileInfo
	start, size, elems := 0, 0, 0
	for i, f := range files {
		n, e := fileFieldSize(f), fileElements(f)
		if i > start && (size+n > maxBytes || elems+e > MaxElements || i-start == MaxIndexFiles) {
			batches = append(batches, files[start:i:i])
			start, size, elems = i, 0, 0
		}
		size += n
		elems += e
	}
	if start < len(files) {
		batches = append(batches, files[start:len(files):len(files)])
	}
	return batches
}

// fileFieldSize is the encoded size of f as one element of the files field.
func fileFieldSize(f *FileInfo) int {
	n := proto.Size(f)
	return protowire.SizeTag(filesField) + protowire.SizeBytes(n)
}
