package fsys

import (
	"io/fs"
	"time"
)

// faultyFile is a File opened through a Faulty.
type faultyFile struct {
	fs   *Faulty
	file File
}

func (f *faultyFile) Name() string { return f.file.Name() }

func (f *faultyFile) Read(p []byte) (int, error) {
	if err := f.fs.enter(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.file.Read(p)
}

func (f *faultyFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.enter(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.file.ReadAt(p, off)
}

func (f *faultyFile) Write(p []byte) (int, error) {
	return f.write(p, f.file.Write)
}

func (f *faultyFile) WriteAt(p []byte, off int64) (int, error) {
	return f.write(p, func(b []byte) (int, error) { return f.file.WriteAt(b, off) })
}

// write applies the write faults around one Write or WriteAt.
func (f *faultyFile) write(p []byte, write func([]byte) (int, error)) (int, error) {
	if err := f.fs.enter(OpWrite, f.Name()); err != nil {
		return 0, err
	}
	granted, limit, slow := f.fs.reserve(len(p))
	if slow > 0 {
		time.Sleep(slow)
	}
	n := 0
	var err error
	if granted > 0 {
		n, err = write(p[:granted])
	}
	if n < granted {
		f.fs.unreserve(granted - n)
	}
	if err == nil && limit != nil {
		err = pathError(string(OpWrite), f.Name(), limit)
	}
	return n, err
}

func (f *faultyFile) Close() error {
	if err := f.fs.enter(OpClose, f.Name()); err != nil {
		f.file.Close() // like close(2), release the file even on error
		return err
	}
	return f.file.Close()
}

func (f *faultyFile) Stat() (fs.FileInfo, error) {
	if err := f.fs.enter(OpStat, f.Name()); err != nil {
		return nil, err
	}
	return f.file.Stat()
}

func (f *faultyFile) Sync() error {
	if err := f.fs.enter(OpFileSync, f.Name()); err != nil {
		return err
	}
	return f.file.Sync()
}

func (f *faultyFile) Truncate(size int64) error {
	if err := f.fs.enter(OpTruncate, f.Name()); err != nil {
		return err
	}
	return f.file.Truncate(size)
}
