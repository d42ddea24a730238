// Package image assembles Joiner's container image without a container
// runtime: one static binary per platform on a FROM-scratch root file system
// (a non-root user; CA certificates only when given), an OCI image index of the platforms,
// an SPDX SBOM per platform attached as an OCI 1.1 referrer, all written as
// an OCI image layout. Every byte is a function of the inputs and the
// creation time (SOURCE_DATE_EPOCH), so two builds of the same sources give
// the same digest. packaging/image/mkimage is the command `make image` runs.
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"
)

// The image's user: distroless's "nonroot", which the chart's
// securityContext names by number.
const (
	UID = 65532
	GID = 65532
)

// Paths inside the image.
const (
	BinaryPath  = "/usr/bin/joiner"
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
)

// file is one entry of the root file system.
type file struct {
	name     string // absolute
	dir      bool
	mode     int64
	uid, gid int
	data     []byte
}

// rootFS is the file system of one platform's image: the binary, the
// users, the CA certificates when given and the directories that hold
// them.
func rootFS(binary, caCerts []byte) []file {
	passwd := "root:x:0:0:root:/root:/sbin/nologin\n" +
		fmt.Sprintf("nonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, GID)
	group := "root:x:0:\n" + fmt.Sprintf("nonroot:x:%d:\n", GID)
	files := []file{
		{name: BinaryPath, mode: 0o755, data: binary},
		{name: "/etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "/etc/group", mode: 0o644, data: []byte(group)},
		{name: "/home/nonroot", dir: true, mode: 0o700, uid: UID, gid: GID},
		{name: "/root", dir: true, mode: 0o700},
		{name: "/tmp", dir: true, mode: 0o1777},
	}
	if len(caCerts) > 0 {
		files = append(files, file{name: CACertsPath, mode: 0o644, data: caCerts})
	}
	return withParents(files)
}

// withParents adds the missing parent directories (0755, root) and sorts
// the entries by name, so a directory precedes its contents.
func withParents(files []file) []file {
	have := map[string]bool{}
	for _, f := range files {
		have[f.name] = true
	}
	out := append([]file(nil), files...)
	for _, f := range files {
		for d := path.Dir(f.name); d != "/"; d = path.Dir(d) {
			if !have[d] {
				have[d] = true
				out = append(out, file{name: d, dir: true, mode: 0o755})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// tarFiles writes files as an uncompressed tar with every time set to
// mtime and numeric owners only: the same files give the same bytes.
func tarFiles(files []file, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name:    strings.TrimPrefix(f.name, "/"),
			Mode:    f.mode,
			Uid:     f.uid,
			Gid:     f.gid,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar entry %s: %w", f.name, err)
		}
		if !f.dir {
			if _, err := tw.Write(f.data); err != nil {
				return nil, fmt.Errorf("tar entry %s: %w", f.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("closing tar: %w", err)
	}
	return buf.Bytes(), nil
}
