package convert

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrMalformed wraps errors about input that is not valid YAML, not UTF-8,
// or does not decode into the type its apiVersion and kind name.
var ErrMalformed = errors.New("malformed manifest")

// ErrConflict wraps errors about input that converts to contradicting v1
// objects (two kubelet blocks for one EC2NodeClass, two objects of one name).
var ErrConflict = errors.New("conflicting manifests")

// ErrUnsupported wraps errors about legacy fields Karpenter's conversion
// refuses too (an AWSNodeTemplate's launchTemplate).
var ErrUnsupported = errors.New("not convertible")

// DocumentError is the error of one input document that did not convert:
// nothing of that document is in the output.
type DocumentError struct {
	// Where names the input and the document, e.g.
	// `old.yaml: document 2 (line 14)`, or `old.yaml` for the whole input.
	Where string
	// What names the object, e.g. `Provisioner default`; empty when the
	// document is not (yet) known to be one.
	What string
	// Err is the reason, naming the field and its value where there is one.
	Err error
}

func (e *DocumentError) Error() string {
	var b bytes.Buffer
	for _, s := range []string{e.Where, e.What} {
		if s != "" {
			b.WriteString(s)
			b.WriteString(": ")
		}
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *DocumentError) Unwrap() error { return e.Err }

// fieldError is a value that does not fit its field: `spec.weight: "ten":
// expected an integer`. It is an ErrMalformed.
type fieldError struct {
	path, value, expected string
}

func (e *fieldError) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.path, e.value, e.expected)
}

func (e *fieldError) Is(target error) bool { return target == ErrMalformed }

// utf8Error is an input that is not UTF-8 (YAML streams Joiner reads and
// writes are UTF-8). It is an ErrMalformed.
type utf8Error struct {
	offset    int    // of the first bad byte
	b         byte   // the byte
	line, col int    // 1-based
	in        string // the document it is in, or "a document separator"
}

func (e *utf8Error) Error() string {
	return fmt.Sprintf("%v: byte 0x%02x at offset %d (line %d, column %d, in %s) is not UTF-8; nothing of this input is converted",
		ErrMalformed, e.b, e.offset, e.line, e.col, e.in)
}

func (e *utf8Error) Is(target error) bool { return target == ErrMalformed }

// checkUTF8 returns a *utf8Error for the first byte of data that is not
// UTF-8, naming the document it is in. Comments count: they pass through
// byte for byte.
func (c *converter) checkUTF8(data []byte, docs []document) error {
	if utf8.Valid(data) {
		return nil
	}
	off := 0
	for off < len(data) {
		r, size := utf8.DecodeRune(data[off:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		off += size
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - (bytes.LastIndexByte(data[:off], '\n') + 1) + 1
	e := &utf8Error{offset: off, b: data[off], line: line, col: col, in: "a document separator"}
	for _, d := range docs {
		lines := bytes.Count(d.raw, []byte("\n"))
		if !bytes.HasSuffix(d.raw, []byte("\n")) {
			lines++
		}
		if line >= d.line && line < d.line+lines {
			e.in = fmt.Sprintf("document %d (line %d)", d.index, d.line)
			break
		}
	}
	return e
}

var (
	yamlLineRE  = regexp.MustCompile(`\bline ([0-9]+)\b`)
	yamlBreakRE = regexp.MustCompile(`:?\s*\n\s*`)
)

// yamlError is a YAML parser error about a document starting on line
// first of its input, on one line, its line numbers made the input's.
func yamlError(err error, first int) error {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	msg = yamlBreakRE.ReplaceAllString(strings.TrimSpace(msg), ": ")
	msg = yamlLineRE.ReplaceAllStringFunc(msg, func(m string) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(m, "line "))
		return "line " + strconv.Itoa(n+first-1)
	})
	return fmt.Errorf("%w: %s", ErrMalformed, msg)
}
