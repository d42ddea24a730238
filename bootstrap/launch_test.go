package bootstrap

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/agent/imds"
)

type fakeMetadata map[string]string

func (f fakeMetadata) Get(_ context.Context, path string) ([]byte, error) {
	v, ok := f[path]
	if !ok {
		return nil, imds.ErrNotFound
	}
	return []byte(v), nil
}

func TestLaunchMappingFromIMDS(t *testing.T) {
	for _, tc := range []struct {
		name     string
		md       fakeMetadata
		mappings []string
		id       string
		err      string
	}{
		{
			name: "ebsN in N order; ami, root, ephemeral and swap are not data volumes",
			md: fakeMetadata{"block-device-mapping/": "ami\nebs10\nebs2\nephemeral0\nroot\nswap",
				"block-device-mapping/ebs2": "sdb", "block-device-mapping/ebs10": "/dev/xvdc\n", "instance-id": "i-0abc"},
			mappings: []string{"sdb", "/dev/xvdc"}, id: "i-0abc",
		},
		{
			name:     "no EBS volume at launch: known and empty",
			md:       fakeMetadata{"block-device-mapping/": "ami\nroot"},
			mappings: []string{},
		},
		{name: "listing fails: unknown", md: fakeMetadata{}, err: "listing the launch block-device mapping: imds: not found"},
		{
			name: "an entry fails: unknown, named",
			md:   fakeMetadata{"block-device-mapping/": "ebs1"},
			err:  "reading the launch block-device mapping ebs1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, id, err := LaunchMappingFromIMDS(tc.md)(context.Background())
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || m != nil {
					t.Fatalf("= %v, %v; want an error saying %q", m, err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(m, tc.mappings) || id != tc.id {
				t.Errorf("= %#v, %q, %v; want %#v, %q", m, id, err, tc.mappings, tc.id)
			}
		})
	}
}

// TestLaunchMappingOverIMDSv2 reads the mapping through the real client from
// an IMDSv2 server: the paths (trailing slash included) are what IMDS serves.
func TestLaunchMappingOverIMDSv2(t *testing.T) {
	md := map[string]string{"/latest/meta-data/block-device-mapping/": "ami\nebs1\nroot",
		"/latest/meta-data/block-device-mapping/ebs1": "sdf", "/latest/meta-data/instance-id": "i-0123"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && r.URL.Path == "/latest/api/token" {
			w.Header().Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "21600")
			w.Write([]byte("token"))
			return
		}
		v, ok := md[r.URL.Path]
		if !ok || r.Header.Get("X-Aws-Ec2-Metadata-Token") != "token" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(v))
	}))
	defer srv.Close()
	c, err := imds.NewClient(imds.ClientOptions{Endpoint: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	m, id, err := LaunchMappingFromIMDS(c)(context.Background())
	if err != nil || !reflect.DeepEqual(m, []string{"sdf"}) || id != "i-0123" {
		t.Errorf("= %v, %q, %v", m, id, err)
	}
	if _, _, err := LaunchMappingFromIMDS(c)(canceled()); err == nil || !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
