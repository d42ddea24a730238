package mime

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const twoParts = `MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig

--//
Content-Type: text/x-shellscript; charset="us-ascii"
Content-Disposition: attachment; filename="a.sh"

#!/bin/bash
echo hi
--//--
`

func TestRoundTripIsByteIdentical(t *testing.T) {
	parts, err := Parse([]byte(twoParts))
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 2 {
		t.Fatalf("%d parts", len(parts))
	}
	if got := parts[1].Headers; len(got) != 2 || got[1].Name != "Content-Disposition" {
		t.Errorf("headers = %v", got)
	}
	if string(parts[1].Body) != "#!/bin/bash\necho hi" {
		t.Errorf("body = %q", parts[1].Body)
	}
	out, err := Write(parts)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != twoParts {
		t.Errorf("round trip differs:\n%s", out)
	}
}

func TestParseVariants(t *testing.T) {
	body := "--B\nContent-Type: text/x-shellscript\n\necho one\n--B\nContent-Type: text/cloud-config\n\n#cloud-config\n--B--\n"
	want := []string{"echo one", "#cloud-config"}
	cases := map[string]string{
		"mime-version first":     "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n" + body,
		"content-type first":     "Content-Type: multipart/mixed; boundary=B\nMIME-Version: 1.0\n\n" + body,
		"crlf":                   strings.ReplaceAll("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n"+body, "\n", "\r\n"),
		"missing close boundary": "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n" + strings.TrimSuffix(body, "--B--\n"),
		"preamble and folding":   "\n\nMIME-Version: 1.0\nContent-Type: multipart/mixed;\n boundary=\"B\"\n\nThis is a preamble.\n" + body,
		"lower-case headers":     "mime-version: 1.0\ncontent-type: Multipart/Mixed; boundary=\"B\"\n\n" + body,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			if !LooksLikeMIME([]byte(in)) {
				t.Errorf("LooksLikeMIME = false")
			}
			parts, err := Parse([]byte(in))
			if err != nil {
				t.Fatal(err)
			}
			if len(parts) != len(want) {
				t.Fatalf("%d parts, want %d", len(parts), len(want))
			}
			for i, p := range parts {
				if string(p.Body) != want[i] {
					t.Errorf("part %d body %q, want %q", i, p.Body, want[i])
				}
			}
			if parts[0].MediaType() != "text/x-shellscript" || parts[1].ContentType() != "text/cloud-config" {
				t.Errorf("types %q %q", parts[0].MediaType(), parts[1].ContentType())
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]string{
		"not a header":         "MIME-Version: 1.0\nMIME_VERSION = 1.0\n\n--B\n\nx\n",
		"no content type":      "MIME-Version: 1.0\n\n--B\n\nx\n",
		"not multipart":        "MIME-Version: 1.0\nContent-Type: text/plain\n\nhello\n",
		"no boundary param":    "Content-Type: multipart/mixed\n\n--B\n\nx\n",
		"boundary never seen":  "Content-Type: multipart/mixed; boundary=B\n\nhello\n",
		"closes before parts":  "Content-Type: multipart/mixed; boundary=B\n\n--B--\n",
		"bad part header":      "Content-Type: multipart/mixed; boundary=B\n\n--B\nnot a header line\n\nx\n--B--\n",
		"bad media type":       "Content-Type: multipart/mixed; boundary=\"B\n\n--B\n\nx\n",
		"empty":                "",
		"leading continuation": " folded\nContent-Type: multipart/mixed; boundary=B\n\n--B\n\nx\n",
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(in))
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("want ErrMalformed, got %v", err)
			}
		})
	}
}

func TestWriteRefusesBoundaryInBody(t *testing.T) {
	_, err := Write([]Part{{Body: []byte("echo\n--//\necho")}})
	if err == nil {
		t.Fatal("want an error")
	}
	out, err := Write([]Part{{Body: []byte("echo --// is fine mid-line")}})
	if err != nil || !bytes.Contains(out, []byte("is fine")) {
		t.Fatal(err)
	}
}

func TestLooksLikeMIME(t *testing.T) {
	for in, want := range map[string]bool{
		"#!/bin/bash\n": false, "  \nMIME-Version: 1.0": true, "content-type: x": true, "": false, "MIME": false,
	} {
		if got := LooksLikeMIME([]byte(in)); got != want {
			t.Errorf("%q: %v", in, got)
		}
	}
}

// FuzzParse: Parse never panics, and anything it accepts writes and parses
// back to a stable archive.
func FuzzParse(f *testing.F) {
	f.Add([]byte(twoParts))
	f.Add([]byte("Content-Type: multipart/mixed; boundary=B\r\nMIME-Version: 1.0\r\n\r\n--B\r\n\r\nx\r\n"))
	f.Add([]byte("MIME-Version: 1.0\nContent-Type: text/plain\n\nhello\n"))
	f.Add([]byte("Content-Type: multipart/mixed; boundary=B\n\n--B\nContent-Transfer-Encoding: quoted-printable\n\na=3Db =\nc\n--B\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		parts, err := Parse(data)
		if err != nil {
			return
		}
		w1, err := Write(parts)
		if err != nil {
			return // a body holding the "//" boundary line
		}
		p2, err := Parse(w1)
		if err != nil {
			t.Fatalf("re-parse of written archive: %v\n%q", err, w1)
		}
		if len(p2) != len(parts) {
			t.Fatalf("part count %d -> %d", len(parts), len(p2))
		}
		w2, err := Write(p2)
		if err != nil || !bytes.Equal(w1, w2) {
			t.Fatalf("not stable: %v\n%q\n%q", err, w1, w2)
		}
	})
}

func TestParseFoldedHeaders(t *testing.T) {
	const body = "\n--B\nContent-Type: text/x-shellscript\n\necho\n--B--\n"
	tests := []struct {
		name    string
		headers string // top-level headers, before the blank line
		want    []Header
	}{
		{
			name:    "not folded",
			headers: "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=B\n",
			want:    []Header{{"MIME-Version", "1.0"}, {"Content-Type", "multipart/mixed; boundary=B"}},
		},
		{
			name:    "one continuation",
			headers: "Content-Type: multipart/mixed;\n boundary=B\n",
			want:    []Header{{"Content-Type", "multipart/mixed; boundary=B"}},
		},
		{
			name:    "tabs and spaces trimmed, pieces joined by one space",
			headers: "Content-Type: multipart/mixed;  \n\t  boundary=B  \nX-A: a\n b\n\tc\n",
			want:    []Header{{"Content-Type", "multipart/mixed; boundary=B"}, {"X-A", "a b c"}},
		},
		{
			name:    "empty first line",
			headers: "X-A:\n a\nContent-Type: multipart/mixed; boundary=B\n",
			want:    []Header{{"X-A", " a"}, {"Content-Type", "multipart/mixed; boundary=B"}},
		},
		{
			name:    "folded last header",
			headers: "Content-Type: multipart/mixed; boundary=B\nX-A: a\n b\n c\n",
			want:    []Header{{"Content-Type", "multipart/mixed; boundary=B"}, {"X-A", "a b c"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hs, next, err := readHeaders(strings.Split(tt.headers+body, "\n"), 0, "top-level", func(l string) bool { return strings.HasPrefix(l, "--") })
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(hs, tt.want) {
				t.Errorf("headers = %q, want %q", hs, tt.want)
			}
			if want := strings.Count(tt.headers, "\n") + 1; next != want {
				t.Errorf("body starts at line index %d, want %d", next, want)
			}
			if _, err := Parse([]byte(tt.headers + body)); err != nil {
				t.Errorf("Parse: %v", err)
			}
		})
	}
	// A part header folded up to the boundary that follows it.
	parts, err := Parse([]byte("Content-Type: multipart/mixed; boundary=B\n\n--B\nX-A: a\n b\n--B\n\nx\n--B--\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 2 || !reflect.DeepEqual(parts[0].Headers, []Header{{"X-A", "a b"}}) {
		t.Errorf("parts = %q", parts)
	}
}

// foldedArchive is an archive whose top-level X-Folded header is folded over
// n lines.
func foldedArchive(n int) []byte {
	var b bytes.Buffer
	b.WriteString("MIME-Version: 1.0\nX-Folded: start\n")
	for range n {
		b.WriteString(" piece\n")
	}
	b.WriteString("Content-Type: multipart/mixed; boundary=B\n\n--B\nContent-Type: text/x-shellscript\n\necho hi\n--B--\n")
	return b.Bytes()
}

// BenchmarkParseFoldedHeader: a header folded over 200 000 lines (12.7 s per
// Parse while folding was quadratic).
func BenchmarkParseFoldedHeader(b *testing.B) {
	const lines = 200_000
	data := foldedArchive(lines)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		parts, err := Parse(data)
		if err != nil || len(parts) != 1 {
			b.Fatalf("Parse: %d parts, %v", len(parts), err)
		}
	}
}

// TestParseQuotedPrintable: a quoted-printable part is decoded and loses its
// Content-Transfer-Encoding header, as Go's multipart reader (Karpenter's)
// hands it over; other encodings are left alone.
func TestParseQuotedPrintable(t *testing.T) {
	cases := []struct {
		name        string
		part        string
		wantHeaders []Header
		wantBody    string
	}{
		{
			name:        "quoted-printable decoded",
			part:        "Content-Type: text/x-shellscript\nContent-Transfer-Encoding: quoted-printable\n\necho caf=C3=A9 && echo a very long line that was =\nsoft broken\necho x=3Dy",
			wantHeaders: []Header{{"Content-Type", "text/x-shellscript"}},
			wantBody:    "echo café && echo a very long line that was soft broken\necho x=y",
		},
		{
			name:        "any case, crlf soft breaks",
			part:        "content-transfer-encoding: Quoted-Printable\r\nContent-Type: text/x-shellscript\r\nX-Keep: 1\r\n\r\nab=\r\ncd",
			wantHeaders: []Header{{"Content-Type", "text/x-shellscript"}, {"X-Keep", "1"}},
			wantBody:    "abcd",
		},
		{
			name:        "base64 kept",
			part:        "Content-Type: text/x-shellscript\nContent-Transfer-Encoding: base64\n\nZWNobyBoaQ==",
			wantHeaders: []Header{{"Content-Type", "text/x-shellscript"}, {"Content-Transfer-Encoding", "base64"}},
			wantBody:    "ZWNobyBoaQ==",
		},
		{
			name:        "7bit kept",
			part:        "Content-Type: text/x-shellscript\nContent-Transfer-Encoding: 7bit\n\necho x=3Dy",
			wantHeaders: []Header{{"Content-Type", "text/x-shellscript"}, {"Content-Transfer-Encoding", "7bit"}},
			wantBody:    "echo x=3Dy",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			parts, err := Parse([]byte("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"B\"\n\n--B\n" + c.part + "\n--B--\n"))
			if err != nil {
				t.Fatal(err)
			}
			if len(parts) != 1 {
				t.Fatalf("%d parts, want 1", len(parts))
			}
			if !reflect.DeepEqual(parts[0].Headers, c.wantHeaders) {
				t.Errorf("headers = %q, want %q", parts[0].Headers, c.wantHeaders)
			}
			if string(parts[0].Body) != c.wantBody {
				t.Errorf("body = %q, want %q", parts[0].Body, c.wantBody)
			}
		})
	}
	_, err := Parse([]byte("Content-Type: multipart/mixed; boundary=B\n\n--B\nContent-Transfer-Encoding: quoted-printable\n\nbad \x01 control byte\n--B--\n"))
	if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "part 1") {
		t.Errorf("invalid quoted-printable: want ErrMalformed naming part 1, got %v", err)
	}
}

// TestParseTrailingDelimiter: an archive that ends with a delimiter instead
// of the closing one (Karpenter's AL2023 MIME example) has only the parts
// before it, with or without a blank line after the delimiter.
func TestParseTrailingDelimiter(t *testing.T) {
	const head = "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n" +
		"--//\nContent-Type: application/node.eks.aws\n\nkind: NodeConfig\n" +
		"--//\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho hi\n--//"
	for name, tail := range map[string]string{"newline": "\n", "none": "", "blank line": "\n\n", "crlf": "\r\n"} {
		t.Run(name, func(t *testing.T) {
			parts, err := Parse([]byte(head + tail))
			if err != nil {
				t.Fatal(err)
			}
			if len(parts) != 2 {
				t.Fatalf("%d parts, want the 2 before the trailing delimiter: %q", len(parts), parts)
			}
			if string(parts[1].Body) != "#!/bin/bash\necho hi" {
				t.Errorf("last part body %q", parts[1].Body)
			}
		})
	}
	// A part with headers after the trailing delimiter is a part.
	parts, err := Parse([]byte(head + "\nContent-Type: text/x-shellscript\n"))
	if err != nil || len(parts) != 3 {
		t.Errorf("header-only last part: %d parts, %v", len(parts), err)
	}
}
