package protocol

import (
	"errors"
	"fmt"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Limits on what one frame's body decodes to, checked on the wire form
// before it is decoded. A few bytes on the wire can cost a hundred in
// memory (an empty FileInfo is 2 bytes on the wire and about 180 decoded,
// and a compressed frame of them is a few kilobytes), so the frame size
// alone does not bound a decoded message.
const (
	// MaxIndexFiles bounds the files of one Index or IndexUpdate. A
	// sender that batches by bytes (BatchFiles, at MaxBatchSize) stays
	// below it with any record of 16 bytes or more, and every record the
	// engine sends is larger (a name, a version counter of at least the
	// time in seconds, a sequence, the short ID of its author); BatchFiles
	// also cuts batches at this many files.
	MaxIndexFiles = 1 << 18

	// MaxSealedRecords bounds the records of one SealedIndex: 32 times
	// the most either side sends in one (2,000 and 1,024).
	MaxSealedRecords = 1 << 16

	// MaxElements bounds what the body of an Index, IndexUpdate or
	// SealedIndex holds: messages at any depth (files, version vectors,
	// counters, blocks, records, inline chunks) and elements of repeated
	// fields (a record's chunk IDs) together. Every element takes at least
	// 2 bytes on the wire, so a batch of MaxBatchSize never reaches it, and
	// a block takes more than 32 (its hash), so neither does a record of
	// a file with as many blocks as fit in a frame. Decoded, that many
	// elements hold at most about 250 MiB (2^21 empty inline chunks).
	MaxElements = 1 << 21

	// MaxOtherElements bounds the same for any other frame: a
	// ClusterConfig's folders, their devices and those devices' addresses
	// (2,000 folders shared with 30 devices of 4 addresses each make
	// 302,000), receiver claims. Decoded, at most about 140 MiB.
	MaxOtherElements = 1 << 20
)

// errElements is wrapped by checkElements's errors.
var errElements = errors.New("too many elements")

// topLimit is a bound on the elements of one top-level repeated field.
type topLimit struct {
	field protowire.Number
	max   int
	what  string
}

// limitsOf returns the element budget of a frame of type typ and the
// bound on its main repeated field, if it has one.
func limitsOf(typ MessageType) (budget int, top topLimit) {
	switch typ {
	case MessageType_MESSAGE_TYPE_INDEX, MessageType_MESSAGE_TYPE_INDEX_UPDATE:
		return MaxElements, topLimit{filesField, MaxIndexFiles, "files"}
	case MessageType_MESSAGE_TYPE_SEALED_INDEX:
		return MaxElements, topLimit{2, MaxSealedRecords, "sealed records"}
	case MessageType_MESSAGE_TYPE_RECEIVER_CLAIMS:
		return MaxOtherElements, topLimit{1, MaxReceiverClaims, "receiver claims"}
	default:
		return MaxOtherElements, topLimit{}
	}
}

// checkElements checks body, the wire form of msg (a message of frame
// type typ), against the limits above without decoding it. Its errors are
// wrapped in ErrMalformed by the caller; a body that does not parse is
// left for the decoder to report.
func checkElements(typ MessageType, msg proto.Message, body []byte) error {
	budget, top := limitsOf(typ)
	w := walker{left: budget}
	n := w.walk(body, shapeOf(msg.ProtoReflect().Descriptor()), top.field)
	if top.field != 0 && n > top.max {
		return fmt.Errorf("%d %s exceed %d", n, top.what, top.max)
	}
	if w.left < 0 {
		return fmt.Errorf("%w: more than %d messages and repeated elements", errElements, budget)
	}
	return nil
}

// A shape is what the walk needs to know of a message type: which of its
// fields hold elements. Indexed by field number.
type shape []fieldShape

// fieldShape is one field of a shape.
type fieldShape struct {
	counts bool  // a message field or a repeated one: each occurrence is an element
	inner  shape // for a message field whose type holds elements: its shape
}

// shapes are built once per message type.
var (
	shapesMu sync.Mutex
	shapes   = map[protoreflect.FullName]shape{}
)

// shapeOf returns md's shape.
func shapeOf(md protoreflect.MessageDescriptor) shape {
	shapesMu.Lock()
	defer shapesMu.Unlock()
	return buildShape(md)
}

// buildShape builds md's shape; shapesMu is held. lockstep.proto has no
// recursive message types.
func buildShape(md protoreflect.MessageDescriptor) shape {
	if s, ok := shapes[md.FullName()]; ok {
		return s
	}
	fields := md.Fields()
	top := 0
	for i := range fields.Len() {
		top = max(top, int(fields.Get(i).Number()))
	}
	s := make(shape, top+1)
	for i := range fields.Len() {
		fd := fields.Get(i)
		f := fieldShape{counts: fd.Kind() == protoreflect.MessageKind || fd.IsList()}
		if fd.Kind() == protoreflect.MessageKind {
			if inner := buildShape(fd.Message()); holdsElements(inner) {
				f.inner = inner
			}
		}
		s[fd.Number()] = f
	}
	shapes[md.FullName()] = s
	return s
}

// holdsElements reports whether a message of shape s can hold elements.
// A block, say, holds none, so the walk need not look inside it.
func holdsElements(s shape) bool {
	for _, f := range s {
		if f.counts {
			return true
		}
	}
	return false
}

// walker counts the elements of a wire-form message down from left.
type walker struct{ left int }

// walk counts the elements of body, a message of shape s, and returns how
// many of them are of field top. It stops early once the budget is spent,
// and at anything that does not parse.
func (w *walker) walk(body []byte, s shape, top protowire.Number) int {
	nTop := 0
	for len(body) > 0 && w.left >= 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 {
			return nTop
		}
		body = body[n:]
		if typ != protowire.BytesType || int(num) >= len(s) || !s[num].counts {
			n = protowire.ConsumeFieldValue(num, typ, body)
			if n < 0 {
				return nTop
			}
			body = body[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(body)
		if n < 0 {
			return nTop
		}
		body = body[n:]
		w.left--
		if num == top {
			nTop++
		}
		if inner := s[num].inner; inner != nil {
			w.walk(v, inner, 0)
		}
	}
	return nTop
}

// fileElements is how many elements f counts for MaxElements.
func fileElements(f *FileInfo) int {
	n := 1 + len(f.GetBlocks())
	if v := f.GetVersion(); v != nil {
		n += 1 + len(v.GetCounters())
	}
	return n
}
