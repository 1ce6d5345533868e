package scan

import (
	"math/bits"
	"strings"
	"unicode/utf8"
)

// Limits on ignore patterns. They keep the cost of one match bounded: the
// matcher simulates the pattern as a nondeterministic automaton, so a match
// costs at most (tokens+1) * len(name) steps, never exponential time.
const (
	// MaxLineLen is the longest line of an ignore file, in bytes.
	MaxLineLen = 4096
	// MaxWildcards is the largest number of wildcards (*, ?, [...], **)
	// in one pattern.
	MaxWildcards = 64
	// MaxPatterns is the largest number of patterns in one ignore file.
	MaxPatterns = 10000
)

// tokKind is the kind of one element of a compiled pattern.
type tokKind uint8

const (
	tLit   tokKind = iota // one literal rune
	tAny                  // '?': one rune other than '/'
	tClass                // '[...]': one rune other than '/' in (or not in) a set
	tStar                 // '*': any run of runes other than '/'
	tDirs                 // "**/": zero or more whole directories
	tAll                  // trailing "**": anything, '/' included
)

type token struct {
	kind   tokKind
	r      rune       // tLit
	negate bool       // tClass: matches runes not in ranges
	ranges []runeSpan // tClass
}

type runeSpan struct{ lo, hi rune }

func (t *token) inClass(c rune) bool {
	in := false
	for _, s := range t.ranges {
		if s.lo <= c && c <= s.hi {
			in = true
			break
		}
	}
	return in != t.negate
}

// glob is a compiled gitignore pattern body (no '!', no trailing '/').
type glob struct {
	toks []token
	// Fast paths, set when the pattern allows them.
	literal string // whole pattern is this literal (lit is true)
	lit     bool
	suffix  string // pattern is '*' followed by this literal (suf is true)
	suf     bool
}

// compileGlob turns a pattern body into tokens. It reports a reason string
// (for PatternError) when the pattern is malformed.
func compileGlob(p string) (*glob, string) {
	g := &glob{}
	wild := 0
	for i := 0; i < len(p); {
		c, size := utf8.DecodeRuneInString(p[i:])
		switch c {
		case '\\':
			if i+1 >= len(p) {
				return nil, "trailing backslash"
			}
			r, n := utf8.DecodeRuneInString(p[i+1:])
			g.toks = append(g.toks, token{kind: tLit, r: r})
			i += 1 + n
			continue
		case '?':
			wild++
			g.toks = append(g.toks, token{kind: tAny})
		case '[':
			t, n, why := compileClass(p[i:])
			if why != "" {
				return nil, why
			}
			wild++
			g.toks = append(g.toks, t)
			i += n
			continue
		case '*':
			wild++
			j := i
			for j < len(p) && p[j] == '*' {
				j++
			}
			atStart := i == 0 || p[i-1] == '/'
			switch {
			case j-i >= 2 && atStart && j == len(p):
				g.toks = append(g.toks, token{kind: tAll})
			case j-i >= 2 && atStart && p[j] == '/':
				g.toks = append(g.toks, token{kind: tDirs})
				j++ // the slash belongs to "**/"
			default:
				// Other runs of asterisks are one ordinary '*'.
				g.toks = append(g.toks, token{kind: tStar})
			}
			i = j
			continue
		default:
			g.toks = append(g.toks, token{kind: tLit, r: c})
		}
		i += size
	}
	if wild > MaxWildcards {
		return nil, "more than 64 wildcards"
	}
	g.setFastPaths()
	return g, ""
}

// compileClass parses "[...]" at the start of p and returns the token and
// the number of bytes consumed. '!' or '^' first negates; ']' first is a
// literal; "a-z" is a range; '\' escapes the next rune.
func compileClass(p string) (token, int, string) {
	t := token{kind: tClass}
	i := 1
	if i < len(p) && (p[i] == '!' || p[i] == '^') {
		t.negate = true
		i++
	}
	first := true
	for {
		if i >= len(p) {
			return token{}, 0, "unterminated character class"
		}
		if p[i] == ']' && !first {
			return t, i + 1, ""
		}
		first = false
		lo, n, ok := classRune(p, i)
		if !ok {
			return token{}, 0, "trailing backslash in character class"
		}
		i += n
		hi := lo
		if i+1 < len(p) && p[i] == '-' && p[i+1] != ']' {
			hi, n, ok = classRune(p, i+1)
			if !ok {
				return token{}, 0, "trailing backslash in character class"
			}
			if hi < lo {
				return token{}, 0, "character class range out of order"
			}
			i += 1 + n
		}
		t.ranges = append(t.ranges, runeSpan{lo, hi})
	}
}

// classRune decodes one possibly escaped rune of a class at p[i:].
func classRune(p string, i int) (rune, int, bool) {
	if p[i] == '\\' {
		if i+1 >= len(p) {
			return 0, 0, false
		}
		r, n := utf8.DecodeRuneInString(p[i+1:])
		return r, 1 + n, true
	}
	r, n := utf8.DecodeRuneInString(p[i:])
	return r, n, true
}

// setFastPaths recognises the two most common shapes, a plain name and
// "*.ext", which need no automaton.
func (g *glob) setFastPaths() {
	var b strings.Builder
	start := 0
	if len(g.toks) > 0 && g.toks[0].kind == tStar {
		start = 1
	}
	for _, t := range g.toks[start:] {
		if t.kind != tLit {
			return
		}
		b.WriteRune(t.r)
	}
	if start == 0 {
		g.literal, g.lit = b.String(), true
		return
	}
	if !strings.Contains(b.String(), "/") {
		g.suffix, g.suf = b.String(), true
	}
}

// match reports whether s matches the whole glob.
func (g *glob) match(s string) bool {
	switch {
	case g.lit:
		return s == g.literal
	case g.suf:
		return strings.HasSuffix(s, g.suffix) && !strings.Contains(s, "/")
	}
	return g.simulate(s, nil)
}

// matchPrefixes calls fn(end) for every end, in increasing order, such
// that s[:end] is a whole number of components of s (end == len(s) or
// s[end] == '/') and matches the glob. It costs one match of s.
func (g *glob) matchPrefixes(s string, fn func(end int)) {
	switch {
	case g.lit:
		if strings.HasPrefix(s, g.literal) && (len(s) == len(g.literal) || s[len(g.literal)] == '/') {
			fn(len(g.literal))
		}
	case g.suf:
		first := s
		if i := strings.IndexByte(s, '/'); i >= 0 {
			first = s[:i]
		}
		if strings.HasSuffix(first, g.suffix) {
			fn(len(first))
		}
	default:
		if g.simulate(s, fn) {
			fn(len(s))
		}
	}
}

// simulate runs the pattern as an NFA over the runes of s and reports
// whether all of s matches. If atSlash is set, it is also called with the
// index of each '/' in s where the part of s before it matches. State i
// (0 <= i <= n, n = len(toks)) means "tokens before i matched"; state n
// accepts. A tDirs token has a second state, n+1+i, for "inside a directory
// name". Each rune costs O(states), so a match is O(len(toks) * len(s)).
func (g *glob) simulate(s string, atSlash func(end int)) bool {
	n := len(g.toks)
	states := 2 * (n + 1)
	words := (states + 63) / 64
	var stack [16]uint64
	var buf []uint64
	if 2*words <= len(stack) {
		buf = stack[:2*words]
	} else {
		buf = make([]uint64, 2*words)
	}
	cur, next := buf[:words], buf[words:]
	accepts := func(set []uint64) bool { return set[n/64]&(1<<(n%64)) != 0 }
	g.closure(cur, 0)
	for i, c := range s {
		if c == '/' && atSlash != nil && accepts(cur) {
			atSlash(i)
		}
		clear(next)
		alive := false
		for w, word := range cur {
			for word != 0 {
				st := w*64 + bits.TrailingZeros64(word)
				word &= word - 1
				if g.step(next, st, c) {
					alive = true
				}
			}
		}
		if !alive {
			return false
		}
		cur, next = next, cur
	}
	return accepts(cur)
}

// step adds to next the states reached from state st on rune c and reports
// whether it added any.
func (g *glob) step(next []uint64, st int, c rune) bool {
	n := len(g.toks)
	if st == n {
		return false // accepting state: nothing left to match
	}
	if st > n { // inside a directory name of the tDirs token st-n-1
		i := st - n - 1
		if c == '/' {
			g.closure(next, i)
		} else {
			addState(next, st)
		}
		return true
	}
	t := &g.toks[st]
	switch t.kind {
	case tLit:
		if c != t.r {
			return false
		}
		g.closure(next, st+1)
	case tAny:
		if c == '/' {
			return false
		}
		g.closure(next, st+1)
	case tClass:
		if c == '/' || !t.inClass(c) {
			return false
		}
		g.closure(next, st+1)
	case tStar:
		if c == '/' {
			return false
		}
		g.closure(next, st)
	case tAll:
		g.closure(next, st)
	case tDirs:
		if c == '/' {
			g.closure(next, st)
		} else {
			addState(next, n+1+st)
		}
	}
	return true
}

// closure adds state i and every state reachable from it without input:
// the wildcards that may match nothing pass on to the next token.
func (g *glob) closure(states []uint64, i int) {
	for {
		addState(states, i)
		if i == len(g.toks) {
			return
		}
		switch g.toks[i].kind {
		case tStar, tAll, tDirs:
			i++
		default:
			return
		}
	}
}

func addState(states []uint64, i int) { states[i/64] |= 1 << (i % 64) }
