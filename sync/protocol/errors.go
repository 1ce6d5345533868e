package protocol

import (
	"errors"
	"io/fs"
)

var (
	// ErrMalformed marks a frame or message that breaks the specification
	// (lockstep.proto). Received from the peer, it is permanent for the
	// connection: the caller closes it. Given to send, the message is not
	// sent and the connection is unharmed. Errors wrap it with the reason.
	ErrMalformed = errors.New("malformed message")

	// ErrFrameTooLarge means a message to send does not fit in one frame
	// (MaxFrameSize). Nothing was sent; the connection is still usable.
	ErrFrameTooLarge = errors.New("message exceeds the frame size limit")

	// ErrUnknownMessage means WriteMessage was given a message type that
	// lockstep.proto does not define as a frame. Nothing was sent.
	ErrUnknownMessage = errors.New("message type not sendable")

	// ErrClosed means the connection is closed: by Close, by its Serve
	// context, or by a failure. Methods of a closed Conn return it wrapped
	// together with the reason the connection ended.
	ErrClosed = errors.New("connection closed")

	// ErrPeerClosed means the peer sent a Close message; the error text
	// carries its reason.
	ErrPeerClosed = errors.New("closed by peer")

	// ErrTimeout means the peer sent nothing, or accepted none of our
	// bytes, for longer than Options.Timeout, or did not say Hello in time.
	ErrTimeout = errors.New("peer timed out")

	// ErrProtocolVersion means the peer's Hello names a protocol version
	// other than ProtocolVersion.
	ErrProtocolVersion = errors.New("unsupported protocol version")

	// ErrNoSuchFile is the requester's side of ERROR_CODE_NO_SUCH_FILE. A
	// Model may return it (or an error matching fs.ErrNotExist) from
	// Request to send that code.
	ErrNoSuchFile = errors.New("peer has no such file")

	// ErrInvalidFile is the requester's side of ERROR_CODE_INVALID_FILE. A
	// Model may return it from Request to send that code.
	ErrInvalidFile = errors.New("peer cannot serve the file")

	// ErrRequestFailed is the requester's side of ERROR_CODE_GENERIC: any
	// other error a Model returns from Request.
	ErrRequestFailed = errors.New("peer failed the request")
)

// codeOf maps an error from Model.Request to the ErrorCode sent to the peer.
func codeOf(err error) ErrorCode {
	switch {
	case err == nil:
		return ErrorCode_ERROR_CODE_NO_ERROR
	case errors.Is(err, ErrNoSuchFile), errors.Is(err, fs.ErrNotExist):
		return ErrorCode_ERROR_CODE_NO_SUCH_FILE
	case errors.Is(err, ErrInvalidFile):
		return ErrorCode_ERROR_CODE_INVALID_FILE
	default:
		return ErrorCode_ERROR_CODE_GENERIC
	}
}

// errorOf maps an ErrorCode received from the peer to the error a
// requester sees; nil for ERROR_CODE_NO_ERROR. Codes this version does not
// know count as ERROR_CODE_GENERIC.
func errorOf(code ErrorCode) error {
	switch code {
	case ErrorCode_ERROR_CODE_NO_ERROR:
		return nil
	case ErrorCode_ERROR_CODE_NO_SUCH_FILE:
		return ErrNoSuchFile
	case ErrorCode_ERROR_CODE_INVALID_FILE:
		return ErrInvalidFile
	default:
		return ErrRequestFailed
	}
}
