package image

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// testOptions builds from this test binary (it carries Go build
// information like any Go binary) for both platforms.
func testOptions(t *testing.T, created time.Time) Options {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		Binaries: []Binary{
			{Platform: v1.Platform{OS: "linux", Architecture: "amd64"}, Data: bin},
			{Platform: v1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}, Data: append([]byte(nil), bin...)},
		},
		CACerts: []byte("-----BEGIN CERTIFICATE-----\ntest\n-----END CERTIFICATE-----\n"),
		Created: created, Version: "v1.2.3", Revision: "abc1234", Source: "https://github.com/joiner-dev/joiner",
	}
}

// buildLayout builds o and writes it, tagged v1.2.3, to a new directory.
func buildLayout(t *testing.T, o Options) (dir string, digest v1.Hash) {
	t.Helper()
	img, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	digest, err = WriteLayout(dir, "v1.2.3", img)
	if err != nil {
		t.Fatal(err)
	}
	return dir, digest
}

func TestLayoutIndexHasBothPlatforms(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	o := testOptions(t, created)
	dir, digest := buildLayout(t, o)
	got, err := ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.IndexDigest != digest {
		t.Errorf("index.json names index %s, WriteLayout returned %s", got.IndexDigest, digest)
	}
	if got.Tag != "v1.2.3" {
		t.Errorf("ref.name %q, want v1.2.3", got.Tag)
	}
	want := []string{"linux/amd64", "linux/arm64/v8"}
	if len(got.Platforms) != len(want) {
		t.Fatalf("platforms %v, want %v", got.Platforms, want)
	}
	for i, p := range want {
		if got.Platforms[i].Platform.String() != p {
			t.Errorf("manifest %d: platform %s, want %s", i, got.Platforms[i].Platform, p)
		}
	}
	for i, p := range got.Platforms {
		t.Run(p.Platform.String(), func(t *testing.T) {
			cf := p.Config
			if cf.OS != p.Platform.OS || cf.Architecture != p.Platform.Architecture || cf.Variant != p.Platform.Variant {
				t.Errorf("config platform %s/%s/%s, index says %s", cf.OS, cf.Architecture, cf.Variant, p.Platform)
			}
			if cf.Config.User != "65532:65532" || strings.Join(cf.Config.Entrypoint, " ") != BinaryPath {
				t.Errorf("user %q entrypoint %q, want 65532:65532 and %s", cf.Config.User, cf.Config.Entrypoint, BinaryPath)
			}
			if !cf.Created.Time.Equal(created) {
				t.Errorf("created %s, want %s", cf.Created.Time, created)
			}
			if p.Annotations[AnnotationRevision] != "abc1234" || p.Annotations[AnnotationVersion] != "v1.2.3" {
				t.Errorf("annotations %v", p.Annotations)
			}
			files := p.Files
			if !bytes.Equal(files[BinaryPath].Data, o.Binaries[i].Data) || files[BinaryPath].Mode != 0o755 {
				t.Errorf("%s: %d bytes mode %o, want the binary, 0755", BinaryPath, len(files[BinaryPath].Data), files[BinaryPath].Mode)
			}
			if !strings.Contains(string(files["/etc/passwd"].Data), "nonroot:x:65532:65532:") {
				t.Errorf("/etc/passwd lacks uid 65532:\n%s", files["/etc/passwd"].Data)
			}
			if !bytes.Equal(files[CACertsPath].Data, o.CACerts) {
				t.Errorf("%s differs from the CA bundle given", CACertsPath)
			}
			if f := files["/tmp"]; !f.Dir || f.Mode != 0o1777 {
				t.Errorf("/tmp: dir %v mode %o, want a 1777 directory", f.Dir, f.Mode)
			}
			if f := files["/home/nonroot"]; f.UID != UID || f.GID != GID {
				t.Errorf("/home/nonroot owned by %d:%d, want %d:%d", f.UID, f.GID, UID, GID)
			}
			for name, f := range files {
				if !f.ModTime.Equal(created) {
					t.Errorf("%s: mtime %s, want %s", name, f.ModTime, created)
				}
			}
			sbom := p.SBOM
			if sbom == nil {
				t.Fatal("no SBOM artifact names this manifest as its subject")
			}
			var doc struct {
				SPDXVersion string `json:"spdxVersion"`
				Packages    []struct {
					Name         string `json:"name"`
					ExternalRefs []struct {
						Locator string `json:"referenceLocator"`
					} `json:"externalRefs"`
				} `json:"packages"`
			}
			if err := json.Unmarshal(sbom, &doc); err != nil {
				t.Fatalf("SBOM: %v", err)
			}
			purls := map[string]bool{}
			for _, pkg := range doc.Packages {
				for _, r := range pkg.ExternalRefs {
					purls[strings.SplitN(r.Locator, "@", 2)[0]] = true
				}
			}
			// A test binary records no dependencies (mkimage's test checks
			// those on a real build).
			for _, want := range []string{"pkg:golang/stdlib", "pkg:golang/github.com/joiner-dev/joiner"} {
				if !purls[want] {
					t.Errorf("SBOM lacks %s (has %d packages)", want, len(doc.Packages))
				}
			}
			if doc.SPDXVersion != "SPDX-2.3" {
				t.Errorf("spdxVersion %q", doc.SPDXVersion)
			}
		})
	}
}

func TestBuildIsReproducible(t *testing.T) {
	created := time.Unix(1767225600, 0)
	var digests []v1.Hash
	var dirs []string
	for range 2 {
		dir, d := buildLayout(t, testOptions(t, created))
		digests, dirs = append(digests, d), append(dirs, dir)
	}
	if digests[0] != digests[1] {
		t.Fatalf("two builds of the same inputs: %s and %s", digests[0], digests[1])
	}
	a, b := treeOf(t, dirs[0]), treeOf(t, dirs[1])
	if len(a) != len(b) {
		t.Fatalf("layouts hold %d and %d files", len(a), len(b))
	}
	for name, data := range a {
		if !bytes.Equal(data, b[name]) {
			t.Errorf("%s differs between the two layouts", name)
		}
	}
	img, err := Build(testOptions(t, created.Add(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := img.Index.Digest(); d == digests[0] {
		t.Error("another creation time gave the same digest: the time is not in the image")
	}
}

// TestCABundleOnlyWhenGiven: by default the image holds no CA bundle (the
// binary carries its roots), so nothing of the build machine's goes in;
// a bundle given is installed at CACertsPath with its parent directories.
func TestCABundleOnlyWhenGiven(t *testing.T) {
	o := testOptions(t, time.Unix(1767225600, 0))
	o.CACerts = nil
	dir, _ := buildLayout(t, o)
	l, err := ReadLayout(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Platforms {
		for name := range p.Files {
			if strings.HasPrefix(name, "/etc/ssl") {
				t.Errorf("%s: the default image holds %s", p.Platform, name)
			}
		}
	}
	o.CACerts = []byte("-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n")
	dir, _ = buildLayout(t, o)
	if l, err = ReadLayout(dir); err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Platforms {
		if f := p.Files[CACertsPath]; !bytes.Equal(f.Data, o.CACerts) || f.Mode != 0o644 {
			t.Errorf("%s: %s %q mode %o, want the bundle given, 0644", p.Platform, CACertsPath, f.Data, f.Mode)
		}
		if f := p.Files["/etc/ssl/certs"]; !f.Dir {
			t.Errorf("%s: /etc/ssl/certs is not a directory", p.Platform)
		}
	}
}

func TestWriteLayoutRefusesOtherDirectories(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := Build(testOptions(t, time.Unix(0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteLayout(dir, "t", img); err == nil || !strings.Contains(err.Error(), "not an OCI image layout") {
		t.Fatalf("err %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "precious")); err != nil {
		t.Fatal("the directory's file was removed")
	}
}

func treeOf(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
