package packaging_test

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/joiner-dev/joiner/userdata"
)

var (
	coordinatorPods = map[string]string{"app.kubernetes.io/name": "joiner", "app.kubernetes.io/instance": "joiner", "app.kubernetes.io/component": "coordinator"}
	agentPods       = map[string]string{"app.kubernetes.io/name": "joiner", "app.kubernetes.io/instance": "joiner", "app.kubernetes.io/component": "agent"}
)

type portKey struct {
	proto corev1.Protocol
	port  int
}

func rulePorts(r networkingv1.NetworkPolicyIngressRule) []portKey {
	var out []portKey
	for _, p := range r.Ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		port := -1
		if p.Port != nil && p.Port.Type == intstr.Int {
			port = p.Port.IntValue()
		}
		out = append(out, portKey{proto, port})
	}
	return out
}

// TestHelmTemplateNetworkPolicy: raft and gossip only from coordinators, the
// HTTP port from apiFrom (any source when empty, else the coordinators, the
// agent pods and the listed peers), no other port, and no policy when
// disabled.
func TestHelmTemplateNetworkPolicy(t *testing.T) {
	raftGossip := []portKey{{corev1.ProtocolTCP, 8300}, {corev1.ProtocolTCP, 8301}, {corev1.ProtocolUDP, 8301}}
	for _, c := range []struct {
		name     string
		values   string
		sets     []string
		want     bool
		httpFrom int // peers allowed on the HTTP port; 0: any source
	}{
		{"default values", "default-values.yaml", nil, true, 0},
		{"apiFrom narrows the HTTP port", "full-values.yaml", nil, true, 4},
		{"disabled", "default-values.yaml", []string{"networkPolicy.enabled=false"}, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := render(t, []string{filepath.Join(chartDir, "ci", c.values)}, c.sets...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			o := find(objects(t, out), "NetworkPolicy", "")
			if !c.want {
				if o != nil {
					t.Errorf("NetworkPolicy rendered with networkPolicy.enabled=false")
				}
				return
			}
			if o == nil {
				t.Fatal("no NetworkPolicy rendered")
			}
			var np networkingv1.NetworkPolicy
			into(t, o, &np)
			if !maps.Equal(np.Spec.PodSelector.MatchLabels, coordinatorPods) || len(np.Spec.PodSelector.MatchExpressions) != 0 {
				t.Errorf("policy selects %v, want the coordinators %v", np.Spec.PodSelector, coordinatorPods)
			}
			if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
				t.Errorf("policyTypes %v, want [Ingress]", np.Spec.PolicyTypes)
			}
			if len(np.Spec.Ingress) != 2 {
				t.Fatalf("want 2 ingress rules (raft/gossip, HTTP), got %+v", np.Spec.Ingress)
			}
			peers := np.Spec.Ingress[0]
			if got := rulePorts(peers); !slices.Equal(got, raftGossip) {
				t.Errorf("peer rule ports %v, want raft and gossip %v", got, raftGossip)
			}
			if len(peers.From) != 1 || peers.From[0].PodSelector == nil || peers.From[0].NamespaceSelector != nil ||
				peers.From[0].IPBlock != nil || !maps.Equal(peers.From[0].PodSelector.MatchLabels, coordinatorPods) {
				t.Errorf("raft/gossip open to %+v, want only the coordinator pods", peers.From)
			}
			api := np.Spec.Ingress[1]
			if got := rulePorts(api); !slices.Equal(got, []portKey{{corev1.ProtocolTCP, 8080}}) {
				t.Errorf("HTTP rule ports %v, want only TCP 8080", got)
			}
			if len(api.From) != c.httpFrom {
				t.Errorf("HTTP port open to %d peers (%+v), want %d", len(api.From), api.From, c.httpFrom)
			}
			if c.httpFrom > 0 {
				var sel []map[string]string
				for _, p := range api.From {
					if p.PodSelector != nil && p.NamespaceSelector == nil {
						sel = append(sel, p.PodSelector.MatchLabels)
					}
				}
				if len(sel) != 2 || !maps.Equal(sel[0], coordinatorPods) || !maps.Equal(sel[1], agentPods) {
					t.Errorf("narrowed HTTP rule lacks the coordinator and agent pods: %+v", api.From)
				}
			}
		})
	}
}

// TestHelmTemplateAgentPodSecurity: the agent runs non-root with no
// capabilities, a read-only root and an fsGroup that can read every Secret
// it mounts.
func TestHelmTemplateAgentPodSecurity(t *testing.T) {
	for _, values := range []string{"default-values.yaml", "full-values.yaml"} {
		t.Run(values, func(t *testing.T) {
			out, err := render(t, []string{filepath.Join(chartDir, "ci", values)})
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			var ds appsv1.DaemonSet
			o := find(objects(t, out), "DaemonSet", "joiner-agent")
			if o == nil {
				t.Fatal("no DaemonSet joiner-agent")
			}
			into(t, o, &ds)
			ps := ds.Spec.Template.Spec
			psc := ps.SecurityContext
			if psc == nil || psc.FSGroup == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot ||
				psc.RunAsUser == nil || *psc.RunAsUser == 0 {
				t.Fatalf("agent pod securityContext %+v: want runAsNonRoot, a non-root runAsUser and an fsGroup", psc)
			}
			c := ps.Containers[0]
			sc := c.SecurityContext
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
				sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 ||
				sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("agent container securityContext %+v: want a read-only root, no privilege escalation, drop ALL and add nothing", sc)
			}
			if sc != nil && sc.RunAsUser != nil && *sc.RunAsUser != *psc.RunAsUser {
				t.Errorf("container runAsUser %d differs from the pod's %d", *sc.RunAsUser, *psc.RunAsUser)
			}
			mounted := map[string]bool{}
			for _, m := range c.VolumeMounts {
				mounted[m.Name] = true
			}
			for _, v := range ps.Volumes {
				if !mounted[v.Name] {
					continue
				}
				var mode *int32
				switch {
				case v.Secret != nil:
					mode = v.Secret.DefaultMode
				case v.Projected != nil:
					mode = v.Projected.DefaultMode
				case v.ConfigMap != nil:
					mode = v.ConfigMap.DefaultMode
				default:
					continue
				}
				// Files are owned by root and group fsGroup: the agent
				// reads them through the group bits.
				if mode == nil || *mode&0o040 == 0 || *mode&0o007 != 0 {
					t.Errorf("volume %s defaultMode %v: want group-readable (0440) and nothing for others", v.Name, mode)
				}
			}
		})
	}
}

func chartAppVersion(t *testing.T) (repo, appVersion string) {
	t.Helper()
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	b, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &chart); err != nil {
		t.Fatal(err)
	}
	var values struct {
		Image struct {
			Repository string `json:"repository"`
		} `json:"image"`
	}
	b, err = os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	return values.Image.Repository, chart.AppVersion
}

// TestDefaultBootstrapImagePinned: the Bottlerocket bootstrap container's
// default image is the chart's image at its appVersion, not a moving tag.
func TestDefaultBootstrapImagePinned(t *testing.T) {
	repo, app := chartAppVersion(t)
	if want := repo + ":" + app; userdata.DefaultBootstrapImage != want {
		t.Errorf("userdata.DefaultBootstrapImage = %q, want the chart's image %q (bump both on a release)", userdata.DefaultBootstrapImage, want)
	}
	if strings.HasSuffix(userdata.DefaultBootstrapImage, ":latest") {
		t.Errorf("userdata.DefaultBootstrapImage %q is a moving tag", userdata.DefaultBootstrapImage)
	}
}

// TestHelmTemplateBootstrapImage: the chart passes a pinned
// --bootstrap-image and refuses a moving one.
func TestHelmTemplateBootstrapImage(t *testing.T) {
	_, app := chartAppVersion(t)
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, c := range []struct {
		name string
		sets []string
		want string // the flag's value; "" = helm must fail
	}{
		{"default: the chart's image at appVersion", nil, "ghcr.io/joiner-dev/joiner:" + app},
		{"image.digest pins by digest", []string{"image.digest=" + digest}, "ghcr.io/joiner-dev/joiner@" + digest},
		{"image.tag", []string{"image.tag=1.2.3"}, "ghcr.io/joiner-dev/joiner:1.2.3"},
		{"settings.bootstrapImage", []string{"settings.bootstrapImage=registry.example:5000/joiner:v9"}, "registry.example:5000/joiner:v9"},
		{"settings.bootstrapImage by digest", []string{"settings.bootstrapImage=registry.example/joiner@" + digest}, "registry.example/joiner@" + digest},
		{"image.tag latest refused", []string{"image.tag=latest"}, ""},
		{"settings.bootstrapImage latest refused", []string{"settings.bootstrapImage=registry.example/joiner:latest"}, ""},
		{"settings.bootstrapImage untagged refused", []string{"settings.bootstrapImage=registry.example:5000/joiner"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := render(t, []string{filepath.Join(chartDir, "ci", "default-values.yaml")}, c.sets...)
			if c.want == "" {
				if err == nil || !strings.Contains(out, "is not pinned") {
					t.Errorf("helm template: err %v, want a 'not pinned' failure, output:\n%s", err, out)
				}
				return
			}
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			var sts appsv1.StatefulSet
			into(t, find(objects(t, out), "StatefulSet", "joiner-coordinator"), &sts)
			var got []string
			for _, a := range sts.Spec.Template.Spec.Containers[0].Args {
				if v, ok := strings.CutPrefix(a, "--bootstrap-image="); ok {
					got = append(got, v)
				}
			}
			if !slices.Equal(got, []string{c.want}) {
				t.Errorf("--bootstrap-image %v, want [%s]", got, c.want)
			}
		})
	}
}
