package convert

import (
	"bytes"
	"strings"
)

// document is one YAML document of an input stream.
type document struct {
	index int    // 1-based position among the non-empty documents
	line  int    // 1-based line the document starts on
	raw   []byte // the document's bytes, separator excluded
}

// splitDocuments cuts a YAML stream at "---" separator lines. Documents that
// hold only whitespace are skipped; everything else is kept byte for byte.
func splitDocuments(in []byte) []document {
	var docs []document
	var cur []byte
	start, line := 1, 0
	flush := func() {
		if len(bytes.TrimSpace(cur)) > 0 {
			docs = append(docs, document{index: len(docs) + 1, line: start, raw: cur})
		}
		cur = nil
	}
	for len(in) > 0 {
		line++
		n := bytes.IndexByte(in, '\n')
		var l []byte
		if n < 0 {
			l, in = in, nil
		} else {
			l, in = in[:n+1], in[n+1:]
		}
		if isSeparator(l) {
			flush()
			start = line + 1
			continue
		}
		if cur == nil {
			start = line
		}
		cur = append(cur, l...)
	}
	flush()
	return docs
}

// isSeparator reports whether l is a document separator ("---", optionally
// followed by blanks or a comment) or a document end marker ("...").
func isSeparator(l []byte) bool {
	s := strings.TrimRight(string(l), "\r\n")
	if s == "..." {
		return true
	}
	if !strings.HasPrefix(s, "---") {
		return false
	}
	rest := s[3:]
	if rest == "" {
		return true
	}
	if rest[0] != ' ' && rest[0] != '\t' {
		return false
	}
	rest = strings.TrimSpace(rest)
	return rest == "" || strings.HasPrefix(rest, "#")
}

// onlyComments reports whether raw holds nothing but comments and blanks.
func onlyComments(raw []byte) bool {
	for _, l := range strings.Split(string(raw), "\n") {
		t := strings.TrimSpace(l)
		if t != "" && !strings.HasPrefix(t, "#") {
			return false
		}
	}
	return true
}
