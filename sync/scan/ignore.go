package scan

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"lockstep/sync/fsys"
)

// IgnoreFile is the name of the ignore file at the root of a folder. It is
// an ordinary file: it syncs like any other.
const IgnoreFile = ".lockstepignore"

// ErrPattern is matched (errors.Is) by every *PatternError.
var ErrPattern = errors.New("invalid ignore pattern")

// PatternError is a line of an ignore file that cannot be used. Permanent:
// the file must be fixed.
type PatternError struct {
	Line    int    // 1-based line number
	Pattern string // the line as written, possibly truncated
	Reason  string
}

func (e *PatternError) Error() string {
	return fmt.Sprintf("%s line %d: %s: %q", IgnoreFile, e.Line, e.Reason, e.Pattern)
}

// Unwrap returns ErrPattern.
func (e *PatternError) Unwrap() error { return ErrPattern }

// Matcher decides which names of a folder are ignored. The zero value and a
// nil *Matcher ignore only the built-in names: the internal directory
// (fsys.InternalDir, any path component equal to it) and the engine's temp
// files (a component starting with fsys.TempPrefix). The ignore file itself
// is not ignored unless a pattern says so.
//
// A Matcher is immutable after ParseIgnore and safe for concurrent use.
type Matcher struct {
	patterns []pattern
}

// pattern is one line of an ignore file.
type pattern struct {
	negate   bool // "!": a match re-includes the name
	dirOnly  bool // trailing "/": matches directories only
	anchored bool // contains a '/': matched against the whole name, else the base name
	glob     *glob
}

// ParseIgnore reads gitignore-style patterns from r, one per line:
//
//   - blank lines and lines starting with '#' are skipped; "\#" starts a
//     pattern with a literal '#';
//   - trailing spaces are dropped unless escaped with '\';
//   - a leading '!' negates: a name it matches is not ignored ("\!" is a
//     literal '!');
//   - a trailing '/' matches directories only;
//   - a pattern with a '/' at the start or in the middle is anchored: it
//     matches the whole folder-relative name (a leading '/' is dropped);
//     otherwise it matches the last component of a name at any depth;
//   - '*' matches any run of characters but '/', '?' one character but '/',
//     "[a-z]", "[!a-z]" and "[^a-z]" one character of (or not of) a set;
//     '\' makes the next character literal. A character is a Unicode code
//     point (git counts bytes: there "?" does not match "é");
//   - "**/" at the start or after a '/' matches zero or more directories, a
//     trailing "/**" everything inside; other runs of '*' are one '*'.
//
// The last pattern that matches a name decides. Lines are normalized to
// Unicode NFC, like names. A line longer than MaxLineLen, with more than
// MaxWildcards wildcards, with an unterminated class or a trailing '\', or
// more than MaxPatterns patterns, is a *PatternError naming the line; read
// errors are returned wrapped.
func ParseIgnore(r io.Reader) (*Matcher, error) {
	m := &Matcher{}
	br := bufio.NewReaderSize(r, 8<<10)
	for line := 1; ; line++ {
		raw, err := readLine(br)
		if errors.Is(err, errLineTooLong) {
			return nil, &PatternError{Line: line, Pattern: truncate(raw), Reason: fmt.Sprintf("longer than %d bytes", MaxLineLen)}
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("reading %s: %w", IgnoreFile, err)
		}
		if line == 1 {
			raw = bytes.TrimPrefix(raw, []byte("\uFEFF"))
		}
		if err == io.EOF && len(raw) == 0 {
			return m, nil
		}
		p, ok, perr := parseLine(line, string(raw))
		if perr != nil {
			return nil, perr
		}
		if ok {
			if len(m.patterns) == MaxPatterns {
				return nil, &PatternError{Line: line, Pattern: truncate(raw), Reason: fmt.Sprintf("more than %d patterns", MaxPatterns)}
			}
			m.patterns = append(m.patterns, p)
		}
		if err == io.EOF {
			return m, nil
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readLine returns the next line without its "\n" or "\r\n". At the end of
// the input it returns what is left and io.EOF. A line longer than
// MaxLineLen is errLineTooLong, with its first bytes.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > MaxLineLen+2 { // room for "\r\n"
			return line[:64], errLineTooLong
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > MaxLineLen {
			return line[:64], errLineTooLong
		}
		return line, err
	}
}

func truncate(b []byte) string {
	if len(b) > 64 {
		b = b[:64]
	}
	return string(b)
}

// parseLine compiles one line. ok is false for blank and comment lines.
func parseLine(line int, s string) (pattern, bool, error) {
	fail := func(why string) (pattern, bool, error) {
		return pattern{}, false, &PatternError{Line: line, Pattern: truncate([]byte(s)), Reason: why}
	}
	if !utf8.ValidString(s) {
		return fail("not valid UTF-8")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return fail("contains NUL")
	}
	s = trimTrailingSpaces(s)
	if s == "" || s[0] == '#' {
		return pattern{}, false, nil
	}
	s = norm.NFC.String(s)
	var p pattern
	if s[0] == '!' {
		p.negate = true
		s = s[1:]
	}
	if strings.HasSuffix(s, "/") {
		p.dirOnly = true
		s = s[:len(s)-1]
	}
	if strings.Contains(s, "/") {
		p.anchored = true
		s = strings.TrimPrefix(s, "/")
	}
	if s == "" {
		return fail("empty pattern")
	}
	g, why := compileGlob(s)
	if why != "" {
		return fail(why)
	}
	p.glob = g
	return p, true, nil
}

// trimTrailingSpaces drops trailing spaces that are not escaped by an odd
// number of backslashes.
func trimTrailingSpaces(s string) string {
	end := len(s)
	for end > 0 && s[end-1] == ' ' {
		end--
	}
	if end == len(s) {
		return s
	}
	slashes := 0
	for i := end - 1; i >= 0 && s[i] == '\\'; i-- {
		slashes++
	}
	if slashes%2 == 1 {
		end++ // keep the escaped space
	}
	return s[:end]
}

// Match reports whether the folder-relative name (NFC, '/'-separated) is
// ignored. isDir says whether name is a directory. A name is ignored when
// it is built in (see Matcher), when the last pattern matching it is not a
// negation, or when any of its parent directories is ignored: as in git, a
// file inside an ignored directory cannot be re-included.
//
// Match decides the name and all its parents in one pass per pattern, so
// its cost does not grow with the depth of the name.
func (m *Matcher) Match(name string, isDir bool) bool {
	var endsBuf [32]int
	ends := endsBuf[:0] // ends[j]: end of the j-th parent, then of name
	start := 0
	for i := 0; i <= len(name); i++ {
		if i < len(name) && name[i] != '/' {
			continue
		}
		if c := name[start:i]; c == fsys.InternalDir || fsys.IsTemp(c) {
			return true
		}
		ends = append(ends, i)
		start = i + 1
	}
	if m == nil {
		return false
	}
	// verdict[j] for the prefix name[:ends[j]]: 0 undecided, 1 ignored,
	// -1 included. Patterns are tried last first; the first to match a
	// prefix decides it.
	var verdictBuf [32]int8
	verdict := verdictBuf[:0]
	for range ends {
		verdict = append(verdict, 0)
	}
	last := len(ends) - 1
	undecided := len(ends)
	for i := len(m.patterns) - 1; i >= 0 && undecided > 0; i-- {
		p := &m.patterns[i]
		decide := func(j int) {
			if verdict[j] != 0 || p.dirOnly && j == last && !isDir {
				return
			}
			verdict[j] = 1
			if p.negate {
				verdict[j] = -1
			}
			undecided--
		}
		if p.anchored {
			j := 0
			p.glob.matchPrefixes(name, func(end int) {
				for ends[j] < end {
					j++
				}
				decide(j)
			})
			continue
		}
		start := 0
		for j, end := range ends {
			if verdict[j] == 0 && p.glob.match(name[start:end]) {
				decide(j)
			}
			start = end + 1
		}
	}
	for _, v := range verdict {
		if v == 1 {
			return true
		}
	}
	return false
}

// matchOne decides name on its own, assuming its parents are not ignored.
// The walker uses it: it never descends into an ignored directory.
func (m *Matcher) matchOne(name string, isDir bool) bool {
	base := name[strings.LastIndexByte(name, '/')+1:]
	if base == fsys.InternalDir || fsys.IsTemp(base) {
		return true
	}
	if m == nil {
		return false
	}
	for i := len(m.patterns) - 1; i >= 0; i-- {
		p := &m.patterns[i]
		if p.dirOnly && !isDir {
			continue
		}
		subject := base
		if p.anchored {
			subject = name
		}
		if p.glob.match(subject) {
			return !p.negate
		}
	}
	return false
}
