// Package mime reads and writes the multipart/mixed archives that cloud-init
// consumes as EC2 user data.
//
// The reader is deliberately forgiving about what users paste into an
// EC2NodeClass: top-level headers in either order (MIME-Version first or
// Content-Type first), CRLF or LF line endings, a missing closing boundary,
// and a preamble before the first boundary. Like Go's multipart reader (what
// Karpenter uses), it decodes quoted-printable part bodies and drops their
// Content-Transfer-Encoding header, and an archive that ends with a
// delimiter but no closing one has no empty part after it. Anything it
// cannot make sense of is an error that names the line; it never panics.
//
// The writer always emits the same shape (LF line endings, boundary "//"):
//
//	MIME-Version: 1.0
//	Content-Type: multipart/mixed; boundary="//"
//
//	--//
//	Content-Type: text/x-shellscript; charset="us-ascii"
//
//	<body>
//	--//--
//
// The package is pure: no I/O, deterministic output.
package mime

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/quotedprintable"
	"slices"
	"strings"
)

// Boundary is the boundary every archive written by this package uses.
const Boundary = "//"

// Content types used by the renderers.
const (
	ContentTypeShell       = `text/x-shellscript; charset="us-ascii"`
	ContentTypeNodeadm     = "application/node.eks.aws"
	ContentTypeCloudConfig = `text/cloud-config; charset="us-ascii"`
	ContentTypeMultiMix    = "multipart/mixed"
)

// ErrMalformed is wrapped by every parse error, so callers can branch on it.
var ErrMalformed = errors.New("malformed MIME user data")

// Header is one part header, kept in the order it was written.
type Header struct {
	Name  string
	Value string
}

// Part is one body part of a multipart archive.
type Part struct {
	// Headers in input order. Names keep their original spelling.
	Headers []Header
	// Body is the part body without the line break that precedes the next
	// boundary. Line endings are normalised to LF.
	Body []byte
}

// ContentType returns the part's Content-Type header value, or "text/plain"
// (RFC 2046's default) when the part has none.
func (p Part) ContentType() string {
	for _, h := range p.Headers {
		if strings.EqualFold(h.Name, "Content-Type") {
			return h.Value
		}
	}
	return "text/plain"
}

// MediaType returns the lower-cased media type of the part without parameters
// (for example "text/x-shellscript").
func (p Part) MediaType() string {
	mt, _, err := mime.ParseMediaType(p.ContentType())
	if err != nil {
		// Fall back to the text before the first ';'.
		mt, _, _ = strings.Cut(p.ContentType(), ";")
		return strings.ToLower(strings.TrimSpace(mt))
	}
	return mt
}

// LooksLikeMIME reports whether data starts (after leading white space) with a
// MIME-Version or Content-Type header, which is how user data announces a MIME
// archive. The check is case-insensitive.
func LooksLikeMIME(data []byte) bool {
	t := bytes.TrimLeft(data, " \t\r\n")
	for _, p := range []string{"mime-version:", "content-type:"} {
		if len(t) >= len(p) && strings.EqualFold(string(t[:len(p)]), p) {
			return true
		}
	}
	return false
}

// Parse reads a multipart archive. The top-level Content-Type must be
// multipart/* with a boundary parameter; at least one part is required.
func Parse(data []byte) ([]Part, error) {
	text := normalise(data)
	lines := strings.Split(text, "\n")
	i := 0
	// Skip leading blank lines.
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	headers, next, err := readHeaders(lines, i, "top-level", func(l string) bool { return strings.HasPrefix(l, "--") })
	if err != nil {
		return nil, err
	}
	if len(headers) == 0 {
		return nil, fmt.Errorf("%w: no headers", ErrMalformed)
	}
	var ctype string
	for _, h := range headers {
		if strings.EqualFold(h.Name, "Content-Type") {
			ctype = h.Value
		}
	}
	if ctype == "" {
		return nil, fmt.Errorf("%w: top-level Content-Type header missing", ErrMalformed)
	}
	mt, params, err := mime.ParseMediaType(ctype)
	if err != nil {
		return nil, fmt.Errorf("%w: top-level Content-Type %q: %v", ErrMalformed, ctype, err)
	}
	if !strings.HasPrefix(mt, "multipart/") {
		return nil, fmt.Errorf("%w: top-level Content-Type is %q, want multipart/*", ErrMalformed, mt)
	}
	boundary := params["boundary"]
	if boundary == "" {
		return nil, fmt.Errorf("%w: top-level Content-Type %q has no boundary parameter", ErrMalformed, ctype)
	}
	delim := "--" + boundary
	closeDelim := delim + "--"

	isDelim := func(l string) (isBoundary, isClose bool) {
		t := strings.TrimRight(l, " \t")
		switch t {
		case closeDelim:
			return true, true
		case delim:
			return true, false
		}
		return false, false
	}

	// Skip the preamble.
	i = next
	for i < len(lines) {
		b, c := isDelim(lines[i])
		if b {
			if c {
				return nil, fmt.Errorf("%w: archive closes (line %d) before any part", ErrMalformed, i+1)
			}
			break
		}
		i++
	}
	if i >= len(lines) {
		return nil, fmt.Errorf("%w: boundary %q never appears", ErrMalformed, boundary)
	}
	i++ // past the first delimiter

	var parts []Part
	for {
		label := fmt.Sprintf("part %d", len(parts)+1)
		ph, bodyStart, err := readHeaders(lines, i, label, func(l string) bool { b, _ := isDelim(l); return b })
		if err != nil {
			return nil, err
		}
		j := bodyStart
		closed, more := false, false
		for j < len(lines) {
			b, c := isDelim(lines[j])
			if b {
				more, closed = !c, c
				break
			}
			j++
		}
		body := strings.Join(lines[bodyStart:min(j, len(lines))], "\n")
		if j >= len(lines) {
			// No closing boundary: the part runs to the end of the input;
			// drop the final line break, as a boundary would have.
			body = strings.TrimSuffix(strings.Join(lines[bodyStart:], "\n"), "\n")
		}
		if j >= len(lines) && len(ph) == 0 && body == "" && len(parts) > 0 {
			// The archive ends with a delimiter and no closing one: no
			// part follows it (Go's multipart reader sees none either).
			break
		}
		part, err := decodePart(Part{Headers: ph, Body: []byte(body)}, label)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part)
		if closed || !more {
			break
		}
		i = j + 1
	}
	return parts, nil
}

// decodePart decodes a quoted-printable body and drops its
// Content-Transfer-Encoding header, as Go's multipart reader (Karpenter's)
// does: the part is copied decoded. Other encodings are kept as they are.
func decodePart(p Part, label string) (Part, error) {
	isCTE := func(h Header) bool { return strings.EqualFold(h.Name, "Content-Transfer-Encoding") }
	idx := slices.IndexFunc(p.Headers, isCTE)
	if idx < 0 || !strings.EqualFold(strings.TrimSpace(p.Headers[idx].Value), "quoted-printable") {
		return p, nil
	}
	body, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(p.Body)))
	if err != nil {
		return Part{}, fmt.Errorf("%w: %s: quoted-printable body: %v", ErrMalformed, label, err)
	}
	p.Headers = slices.DeleteFunc(slices.Clone(p.Headers), isCTE)
	p.Body = []byte(normalise(body))
	return p, nil
}

// readHeaders reads RFC 822 style headers starting at lines[i] up to the
// blank line that ends them. It returns the headers and the index of the
// first body line. Folded (continuation) lines are joined with a space.
// A line for which stop returns true ends the headers without being consumed
// (a boundary written straight after the headers).
//
// The pieces of a folded header are collected and joined once the header
// ends, so the time is linear in the input however many lines a header is
// folded over (appending to the value line by line was quadratic).
func readHeaders(lines []string, i int, where string, stop func(string) bool) ([]Header, int, error) {
	var hs []Header
	var folded []string // the last header's value: first line, then each continuation
	unfold := func() {
		if len(folded) > 1 {
			hs[len(hs)-1].Value = strings.Join(folded, " ")
		}
		folded = folded[:0]
	}
	for ; i < len(lines); i++ {
		l := lines[i]
		if stop(l) {
			unfold()
			return hs, i, nil
		}
		if strings.TrimSpace(l) == "" {
			unfold()
			return hs, i + 1, nil
		}
		if l[0] == ' ' || l[0] == '\t' {
			if len(hs) == 0 {
				return nil, 0, fmt.Errorf("%w: %s header line %d %q: continuation without a header", ErrMalformed, where, i+1, clip(l))
			}
			folded = append(folded, strings.TrimSpace(l))
			continue
		}
		name, value, ok := strings.Cut(l, ":")
		if !ok || !validHeaderName(name) {
			return nil, 0, fmt.Errorf("%w: %s header line %d %q is not a \"Name: value\" header", ErrMalformed, where, i+1, clip(l))
		}
		unfold()
		hs = append(hs, Header{Name: name, Value: strings.TrimSpace(value)})
		folded = append(folded, hs[len(hs)-1].Value)
	}
	// Headers ran to the end of the input: an empty body.
	unfold()
	return hs, len(lines), nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		// RFC 5322 field name: printable US-ASCII except ':' and space.
		if r < 33 || r > 126 || r == ':' {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

func normalise(data []byte) string {
	s := strings.ReplaceAll(string(data), "\r\n", "\n")
	return strings.ReplaceAll(s, "\r", "\n")
}

// Write serialises parts as a multipart/mixed archive with boundary "//" and
// LF line endings. A part body holding a line that would read as the boundary
// is refused, since the archive could not be parsed back.
func Write(parts []Part) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("MIME-Version: 1.0\n")
	b.WriteString(`Content-Type: multipart/mixed; boundary="` + Boundary + `"` + "\n\n")
	for n, p := range parts {
		body := normalise(p.Body)
		for ln, l := range strings.Split(body, "\n") {
			if t := strings.TrimRight(l, " \t"); t == "--"+Boundary || t == "--"+Boundary+"--" {
				return nil, fmt.Errorf("part %d line %d is the MIME boundary %q; it cannot be embedded", n+1, ln+1, "--"+Boundary)
			}
		}
		b.WriteString("--" + Boundary + "\n")
		for _, h := range p.Headers {
			name := strings.TrimSpace(h.Name)
			value := strings.Join(strings.Fields(normalise([]byte(h.Value))), " ")
			if !validHeaderName(name) {
				return nil, fmt.Errorf("part %d: invalid header name %q", n+1, h.Name)
			}
			b.WriteString(name + ": " + value + "\n")
		}
		b.WriteString("\n")
		b.WriteString(body)
		b.WriteString("\n")
	}
	b.WriteString("--" + Boundary + "--\n")
	return b.Bytes(), nil
}
