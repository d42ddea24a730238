package testenv_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/joiner-dev/joiner/test/testenv"
)

func TestReadObjects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.yaml")
	doc := "# comment\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := testenv.ReadObjects(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].GetName() != "a" || objs[1].GetName() != "b" {
		t.Fatalf("ReadObjects = %d objects, want a and b", len(objs))
	}
	if err := os.WriteFile(path, []byte("a: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.ReadObjects(path); err == nil {
		t.Error("ReadObjects of bad YAML: no error")
	}
}
