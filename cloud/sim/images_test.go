package sim

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

// awsLatestParameters are the recommended/latest image parameters AWS
// publishes for EKS nodes for one Kubernetes version, written out from the
// EKS user guide (retrieve-ami-id, retrieve-windows-ami-id) and
// Bottlerocket's docs: family -> arch -> parameter.
func awsLatestParameters(k8s string) map[string]string {
	eks := "/aws/service/eks/optimized-ami/" + k8s
	br := "/aws/service/bottlerocket/aws-k8s-" + k8s
	win := "/aws/service/ami-windows-latest/Windows_Server-%s-English-Core-EKS_Optimized-" + k8s + "/image_id"
	out := map[string]string{
		eks + "/amazon-linux-2023/x86_64/standard/recommended/image_id": "AL2023 x86_64",
		eks + "/amazon-linux-2023/x86_64/nvidia/recommended/image_id":   "AL2023 x86_64",
		eks + "/amazon-linux-2023/x86_64/neuron/recommended/image_id":   "AL2023 x86_64",
		eks + "/amazon-linux-2023/arm64/standard/recommended/image_id":  "AL2023 arm64",
		eks + "/amazon-linux-2023/arm64/nvidia/recommended/image_id":    "AL2023 arm64",
		br + "/x86_64/latest/image_id":                                  "Bottlerocket x86_64",
		br + "/arm64/latest/image_id":                                   "Bottlerocket arm64",
		br + "-nvidia/x86_64/latest/image_id":                           "Bottlerocket x86_64",
		br + "-nvidia/arm64/latest/image_id":                            "Bottlerocket arm64",
		fmt.Sprintf(win, "2019"):                                        "Windows2019 x86_64",
		fmt.Sprintf(win, "2022"):                                        "Windows2022 x86_64",
	}
	if k8s <= "1.32" { // no AL2 images from 1.33
		out[eks+"/amazon-linux-2/recommended/image_id"] = "AL2 x86_64"
		out[eks+"/amazon-linux-2-arm64/recommended/image_id"] = "AL2 arm64"
		out[eks+"/amazon-linux-2-gpu/recommended/image_id"] = "AL2 x86_64"
	}
	if k8s >= "1.35" { // Windows Server 2025 from 1.35
		out[fmt.Sprintf(win, "2025")] = "Windows2025 x86_64"
	}
	return out
}

func isLatest(param string) bool {
	return strings.HasSuffix(param, "/recommended/image_id") || strings.HasSuffix(param, "/latest/image_id") ||
		strings.HasPrefix(param, "/aws/service/ami-windows-latest/")
}

// TestDefaultImagesAsAWSPublishes: the default catalogue publishes, per
// Kubernetes version, exactly the recommended/latest parameters AWS does,
// each naming its own image of the right family and architecture, and the
// pinned parameter of every release (EKS: named after the image;
// Bottlerocket: after its version).
func TestDefaultImagesAsAWSPublishes(t *testing.T) {
	cfg := DefaultConfig()
	s := New(Options{Config: cfg})
	want := map[string]string{}
	for _, v := range []string{"1.31", "1.32", "1.33", "1.34", "1.35"} {
		maps.Copy(want, awsLatestParameters(v))
	}
	got := map[string]string{}
	ids := map[string]string{}
	for param, id := range cfg.Parameters {
		if !isLatest(param) {
			continue
		}
		im, ok := s.image(id)
		if !ok {
			t.Errorf("parameter %s names %s, which DescribeImages does not know", param, id)
			continue
		}
		got[param] = im.Family + " " + im.Arch
		if other, dup := ids[id]; dup {
			t.Errorf("parameters %s and %s name the same image %s", param, other, id)
		}
		ids[id] = param
	}
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if got[p] != want[p] {
			t.Errorf("parameter %s: got %q, want %q", p, got[p], want[p])
		}
	}
	for _, p := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[p]; !ok {
			t.Errorf("parameter %s is published, AWS has none", p)
		}
	}
	for _, tc := range []struct{ param, id string }{
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/recommended/image_id", "ami-0sim2023x86"},
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.32-v20260101/image_id", "ami-0sim2023x86"},
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.32-v20251201/image_id", "ami-0sim2023x86r0"},
		{"/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/arm64/nvidia/amazon-eks-node-al2023-arm64-nvidia-1.34-v20260101/image_id", "ami-0sim2023armnvidiak134"},
		{"/aws/service/eks/optimized-ami/1.31/amazon-linux-2/amazon-eks-node-1.31-v20260101/image_id", "ami-0simal2x86k131"},
		{"/aws/service/eks/optimized-ami/1.31/amazon-linux-2-arm64/amazon-eks-arm64-node-1.31-v20251201/image_id", "ami-0simal2armk131r0"},
		{"/aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/amazon-eks-gpu-node-1.32-v20260101/image_id", "ami-0simal2gpu"},
		{"/aws/service/bottlerocket/aws-k8s-1.32/x86_64/1.50.0/image_id", "ami-0simbrx86"},
		{"/aws/service/bottlerocket/aws-k8s-1.33-nvidia/arm64/1.49.0/image_id", "ami-0simbrarmnvidiak133r0"},
		{"/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.35/image_id", "ami-0simwin2025k135"},
	} {
		if got := cfg.Parameters[tc.param]; got != tc.id {
			t.Errorf("parameter %s = %q, want %q", tc.param, got, tc.id)
		}
	}
	for _, absent := range []string{
		"/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/arm64/neuron/recommended/image_id",
		"/aws/service/eks/optimized-ami/1.33/amazon-linux-2/recommended/image_id",
		"/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.34/image_id",
	} {
		if id, ok := cfg.Parameters[absent]; ok {
			t.Errorf("parameter %s = %s: AWS does not publish it", absent, id)
		}
	}
}

func TestSSMGetParameter(t *testing.T) {
	h := New(Options{Config: DefaultConfig()}).Handler()
	for _, tc := range []struct {
		name, target, body string
		code               int
		errType, value     string
	}{
		{"recommended", "GetParameter", `{"Name":"/aws/service/eks/optimized-ami/` + DefaultKubernetesVersion +
			`/amazon-linux-2023/x86_64/standard/recommended/image_id"}`, http.StatusOK, "", "ami-0sim2023x86"},
		{"pinned bottlerocket", "GetParameter", `{"Name":"/aws/service/bottlerocket/aws-k8s-1.35-nvidia/x86_64/1.50.0/image_id"}`,
			http.StatusOK, "", "ami-0simbrx86nvidiak135"},
		{"unknown", "GetParameter", `{"Name":"/nope"}`, http.StatusBadRequest, "ParameterNotFound", ""},
		{"no name", "GetParameter", `{}`, http.StatusBadRequest, "ValidationException", ""},
		{"empty name", "GetParameter", `{"Name":""}`, http.StatusBadRequest, "ValidationException", ""},
		{"long name", "GetParameter", `{"Name":"/` + strings.Repeat("a", maxParameterName) + `"}`, http.StatusBadRequest, "ValidationException", ""},
		{"bad JSON", "GetParameter", `{`, http.StatusBadRequest, "SerializationException", ""},
		{"other operation", "GetParametersByPath", `{"Path":"/aws"}`, http.StatusBadRequest, "UnknownOperationException", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tc.body))
			req.Header.Set("X-Amz-Target", "AmazonSSM."+tc.target)
			h.ServeHTTP(rec, req)
			var out struct {
				Type      string `json:"__type"`
				Parameter struct{ Value string }
			}
			_ = json.Unmarshal(rec.Body.Bytes(), &out)
			if rec.Code != tc.code || out.Type != tc.errType || out.Parameter.Value != tc.value ||
				(tc.errType != "" && rec.Header().Get("X-Amzn-ErrorType") != tc.errType) {
				t.Errorf("%d %s; want %d, __type %q, value %q", rec.Code, rec.Body, tc.code, tc.errType, tc.value)
			}
		})
	}
}

// TestReleaseImages: a release gives every recommended/latest parameter of
// the family its own new image with the next release version, adds that
// release's pinned parameters, keeps the pinned parameters of earlier
// releases and the other families, and the old images stay describable
// (running instances keep them).
func TestReleaseImages(t *testing.T) {
	s := New(Options{Config: DefaultConfig()})
	before := maps.Clone(s.cfg.Parameters)
	moved := s.ReleaseImages("AL2023")
	latest := 0
	for p, id := range before {
		im, _ := s.image(id)
		now := s.cfg.Parameters[p]
		switch {
		case im.Family != "AL2023" || !isLatest(p):
			if now != id {
				t.Errorf("parameter %s (%s) moved from %s to %s", p, im.Family, id, now)
			}
		default:
			latest++
			next, ok := s.image(now)
			if !ok || now == id || moved[id] != now {
				t.Errorf("parameter %s: %s -> %s (moved %s)", p, id, now, moved[id])
				continue
			}
			if next.Release != "v20260102" || next.Name != strings.Replace(im.Name, "v20260101", "v20260102", 1) ||
				next.Arch != im.Arch || next.CreationDate <= im.CreationDate {
				t.Errorf("parameter %s: new image %+v after %+v", p, next, im)
			}
			if pinned := pinnedParameter(p, next); s.cfg.Parameters[pinned] != now {
				t.Errorf("pinned parameter %s = %q, want %s", pinned, s.cfg.Parameters[pinned], now)
			}
		}
		if _, ok := s.image(id); !ok {
			t.Errorf("old image %s is gone", id)
		}
	}
	if latest != 25 || len(moved) != latest { // 5 variants × 5 versions
		t.Errorf("moved %d images for %d parameters: %v", len(moved), latest, moved)
	}
	if moved["ami-0sim2023x86"] != "ami-0sim2023x86v1" {
		t.Errorf("moved %v", moved)
	}
	if again := s.ReleaseImages("AL2023"); again["ami-0sim2023x86v1"] != "ami-0sim2023x86v2" {
		t.Fatalf("second release moved %v", again)
	}
	if im, _ := s.image("ami-0sim2023x86v2"); im.Release != "v20260103" {
		t.Errorf("second release: %+v", im)
	}
}

func TestNextVersion(t *testing.T) {
	for in, want := range map[string]string{
		"v20260101": "v20260102", "v20261231": "v20270101", "2026.01.31": "2026.02.01", "1.50.0": "1.50.1", "1.9.19": "1.9.20",
		"": "", "custom": "", "v2026": "",
	} {
		if got := nextVersion(in); got != want {
			t.Errorf("nextVersion(%q) = %q, want %q", in, got, want)
		}
	}
}
