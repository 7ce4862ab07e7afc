package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"
)

// Syntax is one of the two ways to write a node tree.
type Syntax int

const (
	HID Syntax = iota // Genode's human-inclined data, the default since 26.02
	XML
)

func (s Syntax) String() string {
	if s == XML {
		return "XML"
	}
	return "HID"
}

// DetectSyntax tells the syntax of data as Genode does: XML when the first non-blank character
// is '<', HID otherwise.
func DetectSyntax(data []byte) Syntax {
	data = bytes.TrimPrefix(data, []byte("\ufeff")) // a byte-order mark some editors write
	for _, c := range data {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '<':
			return XML
		}
		return HID
	}
	return HID
}

// MaxDepth bounds the nesting of nodes, so that deep input is a clear error instead of deep
// recursion in every reader of the tree.
const MaxDepth = 256

// MaxSize bounds the size of a config file.
const MaxSize = 64 << 20

// ParseOptions select between the two readings Genode defines.
type ParseOptions struct {
	// Lenient is the run-time reading: of duplicated attributes the first wins, a broken line
	// is skipped; both come back as warnings. Without it (offline tools) both are errors.
	// Either way a missing end marker, control characters, invalid UTF-8 and malformed XML
	// reject the whole input, as Genode rejects it at run time.
	Lenient bool
}

// ErrorList is every error found in one input, in source order.
type ErrorList []*Error

func (l ErrorList) Error() string {
	s := make([]string, len(l))
	for i, e := range l {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap lets errors.As find the first *Error.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// maxErrors stops a strict parse that has gone off the rails.
const maxErrors = 20

// Parse reads a config in either syntax strictly (any syntax error or duplicated attribute
// is an error). file names the source in positions.
func Parse(file string, data []byte) (*Node, error) {
	n, _, err := ParseWith(file, data, ParseOptions{})
	return n, err
}

// ParseFile reads and strictly parses the file at path.
func ParseFile(path string) (*Node, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// ParseWith reads a config in either syntax; in lenient mode the returned warnings list what
// was skipped.
func ParseWith(file string, data []byte, opts ParseOptions) (*Node, []*Error, error) {
	if DetectSyntax(data) == XML {
		return parseXML(file, data, opts)
	}
	return parseHID(file, data, opts)
}

// ParseXML strictly reads XML.
func ParseXML(file string, data []byte) (*Node, error) {
	n, _, err := parseXML(file, data, ParseOptions{})
	return n, err
}

// ParseHID strictly reads HID.
func ParseHID(file string, data []byte) (*Node, error) {
	n, _, err := parseHID(file, data, ParseOptions{})
	return n, err
}

// readFile reads at most one byte beyond MaxSize, enough for the parsers to refuse the file.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxSize+1))
}

// tooLarge is the error for input beyond MaxSize.
func tooLarge(file string) *Error {
	return Errorf(Pos{File: file, Line: 1, Col: 1}, "config is larger than %d MiB", MaxSize>>20)
}

// badByte returns the offset and a description of the first byte in s that no config may
// hold: invalid UTF-8 or a control character other than those allowed by ok. It returns -1
// when s is clean.
func badByte(s string, ok func(c byte) bool) (int, string) {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && !ok(c) || c == 0x7f {
				return i, fmt.Sprintf("control character %q is not allowed here", c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return i, fmt.Sprintf("byte 0x%02x is not valid UTF-8", c)
		}
		i += size
	}
	return -1, ""
}

// appendAttr adds a to n, with room from the start for the few attributes a node usually has.
func appendAttr(n *Node, a Attr) {
	if n.Attrs == nil {
		n.Attrs = make([]Attr, 0, 4)
	}
	n.Attrs = append(n.Attrs, a)
}

// ident reports the length of the HID identifier ([a-z][a-z0-9_-]*) at the start of s.
func ident(s string) int {
	n := 0
	for n < len(s) {
		c := s[n]
		if c >= 'a' && c <= 'z' || n > 0 && (c >= '0' && c <= '9' || c == '_' || c == '-') {
			n++
			continue
		}
		break
	}
	return n
}

// isIdent reports whether s is a HID node type or attribute tag.
func isIdent(s string) bool { return s != "" && ident(s) == len(s) }
