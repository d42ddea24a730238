package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteIfChanged(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "f")
	for i, tc := range []struct {
		data  string
		wrote bool
	}{{"a", true}, {"a", false}, {"b", true}} {
		wrote, err := WriteIfChanged(p, []byte(tc.data), 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if wrote != tc.wrote {
			t.Errorf("step %d: wrote=%v, want %v", i, wrote, tc.wrote)
		}
		if got, _ := os.ReadFile(p); string(got) != tc.data {
			t.Errorf("step %d: content %q, want %q", i, got, tc.data)
		}
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	if len(ents) != 1 {
		t.Errorf("temp files left behind: %v", ents)
	}
}
