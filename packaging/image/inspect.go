package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Layout is what ReadLayout finds in an OCI image layout WriteLayout wrote.
type Layout struct {
	// Tag is the image index's ref.name in index.json.
	Tag         string
	IndexDigest v1.Hash
	Platforms   []PlatformImage
}

// PlatformImage is one manifest of the index.
type PlatformImage struct {
	Platform    v1.Platform
	Digest      v1.Hash
	Annotations map[string]string
	Config      *v1.ConfigFile
	// Files are the layer's entries by absolute path.
	Files map[string]Entry
	// SBOM is the content of the artifact whose subject is this manifest
	// (nil when none is).
	SBOM []byte
}

// Entry is a file of a layer.
type Entry struct {
	Dir      bool
	Mode     int64
	UID, GID int
	ModTime  time.Time
	Data     []byte
}

// ReadLayout reads dir as a registry client would: index.json, the image
// index it tags, each platform's manifest, config and single layer, and the
// SBOM referrers.
func ReadLayout(dir string) (Layout, error) {
	var out Layout
	root, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return out, fmt.Errorf("layout %s: %w", dir, err)
	}
	rm, err := root.IndexManifest()
	if err != nil {
		return out, fmt.Errorf("layout %s: index.json: %w", dir, err)
	}
	sboms := map[v1.Hash][]byte{}
	for _, d := range rm.Manifests {
		switch {
		case d.MediaType == types.OCIImageIndex:
			if out.IndexDigest != (v1.Hash{}) {
				return out, fmt.Errorf("layout %s: index.json lists two image indexes", dir)
			}
			out.Tag, out.IndexDigest = d.Annotations[AnnotationRefName], d.Digest
		case d.ArtifactType == SBOMMediaType:
			subject, sbom, err := readSBOM(dir, root, d.Digest)
			if err != nil {
				return out, err
			}
			sboms[subject] = sbom
		default:
			return out, fmt.Errorf("layout %s: index.json lists unexpected %s %s", dir, d.MediaType, d.Digest)
		}
	}
	if out.IndexDigest == (v1.Hash{}) {
		return out, fmt.Errorf("layout %s: index.json lists no image index", dir)
	}
	idx, err := root.ImageIndex(out.IndexDigest)
	if err != nil {
		return out, fmt.Errorf("layout %s: index %s: %w", dir, out.IndexDigest, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return out, fmt.Errorf("layout %s: index %s: %w", dir, out.IndexDigest, err)
	}
	for _, d := range im.Manifests {
		if d.Platform == nil {
			return out, fmt.Errorf("layout %s: manifest %s has no platform", dir, d.Digest)
		}
		p, err := readPlatform(idx, d.Digest)
		if err != nil {
			return out, fmt.Errorf("layout %s: %s manifest %s: %w", dir, d.Platform, d.Digest, err)
		}
		p.Platform, p.SBOM = *d.Platform, sboms[d.Digest]
		out.Platforms = append(out.Platforms, p)
	}
	return out, nil
}

func readSBOM(dir string, root v1.ImageIndex, d v1.Hash) (v1.Hash, []byte, error) {
	art, err := root.Image(d)
	if err != nil {
		return v1.Hash{}, nil, fmt.Errorf("layout %s: SBOM %s: %w", dir, d, err)
	}
	m, err := art.Manifest()
	if err != nil {
		return v1.Hash{}, nil, fmt.Errorf("layout %s: SBOM %s: %w", dir, d, err)
	}
	if m.Subject == nil || m.ArtifactType != SBOMMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != SBOMMediaType {
		return v1.Hash{}, nil, fmt.Errorf("layout %s: SBOM %s: want a subject and one %s layer", dir, d, SBOMMediaType)
	}
	b, err := os.ReadFile(filepath.Join(dir, "blobs", m.Layers[0].Digest.Algorithm, m.Layers[0].Digest.Hex))
	if err != nil {
		return v1.Hash{}, nil, fmt.Errorf("layout %s: SBOM %s: %w", dir, d, err)
	}
	return m.Subject.Digest, b, nil
}

func readPlatform(idx v1.ImageIndex, d v1.Hash) (PlatformImage, error) {
	p := PlatformImage{Digest: d, Files: map[string]Entry{}}
	img, err := idx.Image(d)
	if err != nil {
		return p, err
	}
	m, err := img.Manifest()
	if err != nil {
		return p, err
	}
	p.Annotations = m.Annotations
	if p.Config, err = img.ConfigFile(); err != nil {
		return p, err
	}
	layers, err := img.Layers()
	if err != nil {
		return p, err
	}
	if len(layers) != 1 {
		return p, fmt.Errorf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		return p, err
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return p, nil
		}
		if err != nil {
			return p, fmt.Errorf("layer: %w", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return p, fmt.Errorf("layer: %s: %w", h.Name, err)
		}
		p.Files["/"+strings.TrimSuffix(h.Name, "/")] = Entry{Dir: h.Typeflag == tar.TypeDir, Mode: h.Mode, UID: h.Uid, GID: h.Gid,
			ModTime: h.ModTime, Data: data}
	}
}
