package packaging_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const chartDir = "helm/joiner"

// repoRoot is the folder holding go.mod (tests run in packaging/).
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("repository root %s: %v", dir, err)
	}
	return dir
}

// tool returns the path of a pinned tool built by scripts/build-tools.sh, or
// skips the test when it is missing (`make test` builds it first) or under
// -short.
func tool(t testing.TB, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: %s not run", name)
	}
	bin := os.Getenv("JOINER_TOOLS_BIN")
	if bin == "" {
		bin = filepath.Join(repoRoot(t), "bin")
	}
	p := filepath.Join(bin, name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s not built (%v): run `make tools` or `bash scripts/build-tools.sh %s`", name, err, name)
	}
	return p
}

func run(t testing.TB, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// kubeVersion is passed to helm so the chart's kubeVersion constraint is
// checked against a real version (a helm built from the module proxy
// defaults to v1.20).
const kubeVersion = "1.33.0"

// monitoringAPI is the Prometheus Operator's API version: render and
// renderRelease pass it to helm (--api-versions) as a cluster with the
// operator serves it, so the ServiceMonitor renders when enabled
// (TestHelmTemplateServiceMonitorNeedsTheAPI renders without it).
const monitoringAPI = "monitoring.coreos.com/v1"

// render runs helm template with the values files and --set flags.
func render(t testing.TB, values []string, sets ...string) (string, error) {
	t.Helper()
	helm := tool(t, "helm")
	args := []string{"template", "joiner", chartDir, "--namespace", "joiner", "--kube-version", kubeVersion, "--api-versions", monitoringAPI}
	for _, v := range values {
		args = append(args, "-f", v)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return run(t, ".", nil, helm, args...)
}

// renderDefault renders the chart with ci/default-values.yaml and the
// --set flags, failing the test when helm does.
func renderDefault(t testing.TB, sets ...string) string {
	t.Helper()
	out, err := render(t, []string{filepath.Join(chartDir, "ci", "default-values.yaml")}, sets...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	return out
}

// objects splits a multi-document YAML stream into objects.
func objects(t testing.TB, manifest string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(manifest, "\n---") {
		if strings.TrimSpace(strings.TrimPrefix(doc, "---")) == "" {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && (name == "" || o.GetName() == name) {
			return o
		}
	}
	return nil
}

// into converts an unstructured object to a typed one.
func into(t testing.TB, o *unstructured.Unstructured, out any) {
	t.Helper()
	b, err := yaml.Marshal(o.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, out); err != nil {
		t.Fatalf("%s %s does not decode strictly: %v", o.GetKind(), o.GetName(), err)
	}
}

func ciValues(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no values files in %s/ci: %v", chartDir, err)
	}
	ex, _ := filepath.Glob(filepath.Join("helm", "examples", "clusters", "*", "values.yaml"))
	return append(files, ex...)
}

// crdChartDir is the CRD-only chart (Karpenter's karpenter-crd pattern).
const crdChartDir = "helm/joiner-crd"

// crdDocs reads the generated CRDs (packaging/crds) by name.
func crdDocs(t testing.TB) map[string]*unstructured.Unstructured {
	t.Helper()
	gen, err := filepath.Glob("crds/*.yaml")
	if err != nil || len(gen) == 0 {
		t.Fatalf("no generated CRDs in packaging/crds: %v", err)
	}
	out := map[string]*unstructured.Unstructured{}
	for _, g := range gen {
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objects(t, string(b)) {
			out[o.GetName()] = o
		}
	}
	return out
}

// TestChartCRDsMatchGenerated: both charts render exactly the generated CRDs
// (scripts/sync-chart-crds.sh copies them as templates), kept on uninstall;
// the main chart only with crds.install.
func TestChartCRDsMatchGenerated(t *testing.T) {
	tool(t, "helm")
	want := crdDocs(t)
	for _, c := range []struct {
		name, chart string
		sets        []string
		crds        bool
	}{
		{"joiner (crds.install default)", chartDir, []string{"settings.clusterName=x", "additionalAnnotations.a=b"}, true},
		{"joiner crds.install=false", chartDir, []string{"settings.clusterName=x", "crds.install=false"}, false},
		{"joiner-crd", crdChartDir, []string{"additionalAnnotations.a=b"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := renderRelease(t, c.chart, "joiner", nil, c.sets...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			got := map[string]*unstructured.Unstructured{}
			for _, o := range objects(t, out) {
				if o.GetKind() == "CustomResourceDefinition" {
					got[o.GetName()] = o
				}
			}
			if !c.crds {
				if len(got) != 0 {
					t.Errorf("CRDs rendered with crds.install=false: %v", slices.Sorted(maps.Keys(got)))
				}
				return
			}
			if len(got) != len(want) {
				t.Errorf("rendered CRDs %v, generated %v: run `bash scripts/sync-chart-crds.sh`", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
			}
			for name, w := range want {
				g := got[name]
				if g == nil {
					t.Errorf("CRD %s not rendered: run `bash scripts/sync-chart-crds.sh`", name)
					continue
				}
				ann := g.GetAnnotations()
				if ann["helm.sh/resource-policy"] != "keep" || ann["a"] != "b" {
					t.Errorf("CRD %s annotations %v: want helm.sh/resource-policy=keep and additionalAnnotations", name, ann)
				}
				if !equality(g.Object["spec"], w.Object["spec"]) {
					t.Errorf("CRD %s differs from packaging/crds: run `bash scripts/sync-chart-crds.sh` (make generate does)", name)
				}
			}
		})
	}
}

// equality compares two decoded YAML trees.
func equality(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

func TestHelmLint(t *testing.T) {
	helm := tool(t, "helm")
	out, err := run(t, ".", nil, helm, "lint", "--strict", crdChartDir, "--kube-version", kubeVersion)
	if err != nil || strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
		t.Errorf("helm lint --strict %s: %v\n%s", crdChartDir, err, out)
	}
	for _, v := range append(ciValues(t), karpenterValues) {
		t.Run(v, func(t *testing.T) {
			out, err := run(t, ".", nil, helm, "lint", "--strict", chartDir, "-f", v, "--kube-version", kubeVersion, "--set", "settings.clusterName=lint")
			if err != nil {
				t.Fatalf("helm lint --strict -f %s: %v\n%s", v, err, out)
			}
			if strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
				t.Errorf("helm lint -f %s:\n%s", v, out)
			}
		})
	}
}

func TestHelmTemplateRejectsBadValues(t *testing.T) {
	tool(t, "helm")
	for _, c := range []struct {
		name string
		sets []string
		want string
	}{
		{"no cluster name", nil, "settings.clusterName is required"},
		{"bootstrapExpect != replicas", []string{"settings.clusterName=x", "replicas=5", "coordinator.bootstrapExpect=3"}, "coordinator.bootstrapExpect (3) must equal replicas (5)"},
		{"no coordinator", []string{"settings.clusterName=x", "replicas=0"}, "replicas"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := render(t, nil, c.sets...)
			if err == nil || !strings.Contains(out, c.want) {
				t.Errorf("helm template: err %v, want an error containing %q, output:\n%s", err, c.want, out)
			}
		})
	}
}

func TestHelmTemplateDefaults(t *testing.T) {
	out := renderDefault(t)
	objs := objects(t, out)

	var sts appsv1.StatefulSet
	o := find(objs, "StatefulSet", "joiner-coordinator")
	if o == nil {
		t.Fatalf("no StatefulSet joiner-coordinator in:\n%s", out)
	}
	into(t, o, &sts)
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas != 3 {
		t.Errorf("coordinator replicas = %v, want 3", sts.Spec.Replicas)
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy = %q, want Parallel", sts.Spec.PodManagementPolicy)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 || sts.Spec.VolumeClaimTemplates[0].Name != "data" {
		t.Errorf("want one volumeClaimTemplate named data, got %+v", sts.Spec.VolumeClaimTemplates)
	}
	ps := sts.Spec.Template.Spec
	aa := ps.Affinity.PodAntiAffinity
	if aa == nil || len(aa.RequiredDuringSchedulingIgnoredDuringExecution) == 0 ||
		aa.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != corev1.LabelHostname {
		t.Errorf("coordinator lacks required anti-affinity across hosts: %+v", aa)
	}
	if aa == nil || len(aa.PreferredDuringSchedulingIgnoredDuringExecution) == 0 ||
		aa.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != corev1.LabelTopologyZone {
		t.Errorf("coordinator lacks anti-affinity across zones: %+v", aa)
	}
	keys := map[string]bool{}
	for _, c := range ps.TopologySpreadConstraints {
		keys[c.TopologyKey] = true
	}
	if !keys[corev1.LabelTopologyZone] || !keys[corev1.LabelHostname] {
		t.Errorf("topology spread keys %v, want zone and hostname", keys)
	}
	args := strings.Join(ps.Containers[0].Args, " ")
	for _, want := range []string{"coordinator", "--cluster-name=ci", "--bootstrap-expect=3", "--data-dir=/var/lib/joiner",
		"--advertise=$(POD_NAME).joiner-coordinator-peers.joiner.svc.cluster.local:8300",
		"--join=joiner-coordinator-peers.joiner.svc.cluster.local:8301"} {
		if !strings.Contains(args, want) {
			t.Errorf("coordinator args %q lack %q", args, want)
		}
	}
	// Requests but no limit by default: a values file raising a request
	// (Karpenter's default resources are {}) never ends above a default
	// limit, which the API server would refuse.
	if res := ps.Containers[0].Resources; len(res.Limits) != 0 || res.Requests.Cpu().String() != "200m" || res.Requests.Memory().String() != "256Mi" {
		t.Errorf("coordinator resources %+v: want requests 200m/256Mi and no limit", res)
	}
	mounted := false
	for _, m := range ps.Containers[0].VolumeMounts {
		mounted = mounted || (m.Name == "data" && m.MountPath == "/var/lib/joiner")
	}
	if !mounted {
		t.Error("the data PVC is not mounted at the raft data dir /var/lib/joiner")
	}

	var headless corev1.Service
	o = find(objs, "Service", sts.Spec.ServiceName)
	if o == nil {
		t.Fatalf("no Service %q (the StatefulSet's serviceName)", sts.Spec.ServiceName)
	}
	into(t, o, &headless)
	if headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("service %s: clusterIP %q publishNotReadyAddresses %v, want headless and true", headless.Name, headless.Spec.ClusterIP, headless.Spec.PublishNotReadyAddresses)
	}

	var pdb policyv1.PodDisruptionBudget
	o = find(objs, "PodDisruptionBudget", "")
	if o == nil {
		t.Fatal("no PodDisruptionBudget")
	}
	into(t, o, &pdb)
	if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
		t.Errorf("PDB maxUnavailable = %v, want 1", pdb.Spec.MaxUnavailable)
	}
	if pdb.Spec.Selector.MatchLabels["app.kubernetes.io/component"] != "coordinator" {
		t.Errorf("PDB selects %v, want the coordinators", pdb.Spec.Selector.MatchLabels)
	}

	var ds appsv1.DaemonSet
	o = find(objs, "DaemonSet", "joiner-agent")
	if o == nil {
		t.Fatal("no DaemonSet joiner-agent")
	}
	into(t, o, &ds)
	dps := ds.Spec.Template.Spec
	tolerAll := false
	for _, tol := range dps.Tolerations {
		tolerAll = tolerAll || (tol.Operator == corev1.TolerationOpExists && tol.Key == "" && tol.Effect == "")
	}
	if !tolerAll {
		t.Errorf("agent does not tolerate every taint: %+v", dps.Tolerations)
	}
	for _, v := range dps.Volumes {
		if v.HostPath != nil {
			t.Errorf("agent mounts host path %s; it needs none", v.HostPath.Path)
		}
	}
	sc := dps.Containers[0].SecurityContext
	if sc == nil || (sc.Privileged != nil && *sc.Privileged) || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.Capabilities == nil || len(sc.Capabilities.Add) != 0 {
		t.Errorf("agent container is not restricted: %+v", sc)
	}
	aargs := strings.Join(dps.Containers[0].Args, " ")
	for _, want := range []string{"agent", "--node-name=$(NODE_NAME)", "--policy=spot-interruption=drain", "--coordinator=https://joiner-coordinator.joiner.svc.cluster.local:8080",
		"--coordinator-token-file=/var/run/secrets/joiner.io/token", "--coordinator-ca-file=/etc/joiner/coordinator-ca/ca.crt"} {
		if !strings.Contains(aargs, want) {
			t.Errorf("agent args %q lack %q", aargs, want)
		}
	}
	// Secure by default: the agent's identity is a projected token for our
	// audience, bound to its pod; the coordinators' CA comes from the
	// ConfigMap they publish; the coordinators run TLS from their CA Secret
	// and check agents' tokens.
	var audience string
	for _, v := range dps.Volumes {
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.ServiceAccountToken != nil {
					audience = src.ServiceAccountToken.Audience
				}
			}
		}
	}
	if audience != "joiner.io" {
		t.Errorf("agent projected token audience %q, want joiner.io", audience)
	}
	var dsts appsv1.StatefulSet
	into(t, find(objs, "StatefulSet", ""), &dsts)
	cargs := strings.Join(dsts.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--tls-ca-secret=joiner-coordinator-ca", "--tls-ca-configmap=joiner-coordinator-ca", "--namespace=joiner",
		"--tls-san=joiner-coordinator.joiner.svc,joiner-coordinator.joiner.svc.cluster.local", "--agent-service-account=system:serviceaccount:joiner:joiner-agent"} {
		if !strings.Contains(cargs, want) {
			t.Errorf("coordinator args %q lack %q", cargs, want)
		}
	}
	for _, bad := range []string{"--insecure-dev", "--token-file"} {
		if strings.Contains(cargs, bad) {
			t.Errorf("coordinator args %q carry %s", cargs, bad)
		}
	}
	if p := dsts.Spec.Template.Spec.Containers[0].ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
		t.Errorf("coordinator readiness probe %+v: want HTTPS", p)
	}

	if find(objs, "ServiceMonitor", "") != nil {
		t.Error("ServiceMonitor rendered although serviceMonitor.enabled is false")
	}
	var sa corev1.ServiceAccount
	into(t, find(objs, "ServiceAccount", "joiner-coordinator"), &sa)
	if _, ok := sa.Annotations["eks.amazonaws.com/role-arn"]; ok {
		t.Error("role-arn annotation without serviceAccount.roleArn")
	}
	checkRBAC(t, objs)
}

// checkRBAC: no wildcards, no secrets, and the agent cannot touch CRDs.
func checkRBAC(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	n := 0
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
			continue
		}
		n++
		var r rbacv1.ClusterRole
		into(t, o, &r)
		for _, rule := range r.Rules {
			for _, s := range append(append(append([]string{}, rule.Verbs...), rule.Resources...), rule.APIGroups...) {
				if s == "*" {
					t.Errorf("%s %s has a wildcard rule %+v", o.GetKind(), o.GetName(), rule)
				}
			}
			for _, res := range rule.Resources {
				// Secrets: only the coordinator's CA, in its namespace:
				// create (not limitable by name) and get by name.
				caOnly := o.GetKind() == "Role" && o.GetName() == "joiner-coordinator" &&
					(slices.Equal(rule.Verbs, []string{"create"}) ||
						(slices.Equal(rule.Verbs, []string{"get"}) && slices.Equal(rule.ResourceNames, []string{"joiner-coordinator-ca"})))
				if res == "secrets" && !caOnly {
					t.Errorf("%s %s grants access to secrets: %+v", o.GetKind(), o.GetName(), rule)
				}
				if strings.Contains(o.GetName(), "agent") && (res == "nodeclaims" || res == "nodepools" || res == "ec2nodeclasses") {
					t.Errorf("agent role %s grants %s", o.GetName(), res)
				}
			}
		}
	}
	if n < 4 {
		t.Errorf("want roles for coordinator and agent, found %d", n)
	}
}

func TestHelmTemplateFullValues(t *testing.T) {
	out, err := render(t, []string{filepath.Join(chartDir, "ci", "full-values.yaml")})
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	objs := objects(t, out)
	sm := find(objs, "ServiceMonitor", "")
	if sm == nil {
		t.Fatal("no ServiceMonitor with serviceMonitor.enabled")
	}
	// The coordinators serve TLS: scraped over https, checked against their CA.
	eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(eps) == 0 || eps[0].(map[string]any)["scheme"] != "https" {
		t.Errorf("coordinator metrics endpoint %v: want scheme https", eps)
	}
	// Every scrape sends Prometheus' own token (metricsReaders authorize
	// it); the agents serve HTTPS with a self-signed certificate.
	for _, ep := range eps {
		if ep.(map[string]any)["bearerTokenFile"] != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
			t.Errorf("metrics endpoint %v sends no ServiceAccount token", ep)
		}
	}
	if len(eps) != 2 || eps[1].(map[string]any)["scheme"] != "https" ||
		eps[1].(map[string]any)["tlsConfig"].(map[string]any)["insecureSkipVerify"] != true {
		t.Errorf("agent metrics endpoint %v: want https, insecureSkipVerify", eps)
	}
	var sa corev1.ServiceAccount
	into(t, find(objs, "ServiceAccount", "joiner-coordinator"), &sa)
	if got := sa.Annotations["eks.amazonaws.com/role-arn"]; got != "arn:aws:iam::111122223333:role/JoinerControllerRole-ci-full" {
		t.Errorf("IRSA annotation = %q", got)
	}
	var sts appsv1.StatefulSet
	into(t, find(objs, "StatefulSet", ""), &sts)
	args := strings.Join(sts.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--cluster-endpoint=https://", "--cluster-ca-bundle=LS0tLS1CRUdJTi", "--interruption-queue=ci-full-interruptions", "--tls-cert-file=", "--gossip-keyring-file=", "--log-level=debug",
		"--tls-ca-configmap=joiner-coordinator-ca"} {
		if !strings.Contains(args, want) {
			t.Errorf("coordinator args %q lack %q", args, want)
		}
	}
	if strings.Contains(args, "--tls-ca-secret") {
		t.Errorf("coordinator args %q: both a TLS Secret and the CA Secret", args)
	}
	mounted := false
	for _, m := range sts.Spec.Template.Spec.Containers[0].VolumeMounts {
		mounted = mounted || m.MountPath == "/etc/joiner/tls"
	}
	if !mounted {
		t.Error("coordinator does not mount the TLS Secret its --tls-cert-file reads")
	}
	var ds appsv1.DaemonSet
	into(t, find(objs, "DaemonSet", ""), &ds)
	aargs := strings.Join(ds.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--coordinator-token-file=", "--coordinator-ca-file=", "--force-after=10m"} {
		if !strings.Contains(aargs, want) {
			t.Errorf("agent args %q lack %q", aargs, want)
		}
	}
	if p := ds.Spec.Template.Spec.Containers[0].LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
		t.Errorf("agent liveness probe %+v: want HTTPS (its metrics address is the node's)", p)
	}
}

// unit reads a systemd unit into section -> key -> values.
func unit(t testing.TB, path string) map[string]map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][]string{}
	sec := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			sec = strings.Trim(line, "[]")
			out[sec] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || sec == "" {
				t.Fatalf("%s: bad line %q", path, line)
			}
			out[sec][k] = append(out[sec][k], v)
		}
	}
	return out
}

func TestSystemdUnits(t *testing.T) {
	agent := unit(t, "systemd/joiner-agent.service")
	boot := unit(t, "systemd/joiner-bootstrap.service")
	for _, c := range []struct {
		u             map[string]map[string][]string
		sec, key, val string
	}{
		{agent, "Service", "Type", "notify"},
		{agent, "Service", "Restart", "always"},
		{agent, "Service", "WatchdogSec", "30s"},
		{agent, "Unit", "After", "joiner-bootstrap.service"},
		{agent, "Install", "WantedBy", "multi-user.target"},
		{boot, "Service", "Type", "oneshot"},
		{boot, "Service", "RemainAfterExit", "yes"},
		{boot, "Unit", "Before", "kubelet.service"},
		{boot, "Service", "ExecStart", "--start-agent=false"},
	} {
		found := false
		for _, v := range c.u[c.sec][c.key] {
			found = found || strings.Contains(" "+v+" ", " "+c.val+" ") || strings.Contains(v, c.val)
		}
		if !found {
			t.Errorf("[%s] %s = %v, want it to contain %q", c.sec, c.key, c.u[c.sec][c.key], c.val)
		}
	}
}

func TestSystemdUnitsVerify(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: systemd-analyze verify not run")
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze not installed (Debian package systemd)")
	}
	stand, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1) to stand in for /usr/bin/joiner")
	}
	// verify checks that ExecStart's binary exists; stand true(1) in for it.
	dir := t.TempDir()
	var files []string
	units, _ := filepath.Glob("systemd/*.service")
	for _, u := range units {
		b, _ := os.ReadFile(u)
		p := filepath.Join(dir, filepath.Base(u))
		if err := os.WriteFile(p, bytes.ReplaceAll(b, []byte("/usr/bin/joiner"), []byte(stand)), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	out, err := run(t, dir, []string{"SYSTEMD_UNIT_PATH=" + dir + ":"}, "systemd-analyze", append([]string{"verify", "--man=no"}, files...)...)
	t.Logf("systemd-analyze verify: %v %q", err, out)
	if err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	for _, f := range files {
		if strings.Contains(out, filepath.Base(f)) {
			t.Errorf("systemd-analyze verify complains about %s:\n%s", filepath.Base(f), out)
		}
	}
}

// buildPackages runs nfpm with the repository's config for deb and rpm, in
// a copy of the layout it expects (a stand-in dist/joiner: the package's
// shape is under test, not the binary).
func buildPackages(t *testing.T) (deb, rpm string) {
	t.Helper()
	nfpm := tool(t, "nfpm")
	root := repoRoot(t)
	work := t.TempDir()
	if err := os.MkdirAll(filepath.Join(work, "dist"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "dist", "joiner"), []byte("#!/bin/sh\necho joiner stand-in\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "packaging"), filepath.Join(work, "packaging")); err != nil {
		t.Fatal(err)
	}
	env := []string{"JOINER_VERSION=1.2.3+test", "JOINER_ARCH=" + runtime.GOARCH}
	out := filepath.Join(work, "out")
	os.Mkdir(out, 0o755)
	for _, p := range []string{"deb", "rpm"} {
		if o, err := run(t, work, env, nfpm, "package", "-f", "packaging/nfpm/nfpm.yaml", "-p", p, "-t", out); err != nil {
			t.Fatalf("nfpm package -p %s: %v\n%s", p, err, o)
		}
	}
	debs, _ := filepath.Glob(filepath.Join(out, "*.deb"))
	rpms, _ := filepath.Glob(filepath.Join(out, "*.rpm"))
	if len(debs) != 1 || len(rpms) != 1 {
		t.Fatalf("want one deb and one rpm, got %v %v", debs, rpms)
	}
	return debs[0], rpms[0]
}

func TestPackages(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: packages not built")
	}
	deb, rpm := buildPackages(t)

	b, err := os.ReadFile(rpm)
	if err != nil || len(b) < 4 || !bytes.Equal(b[:4], []byte{0xed, 0xab, 0xee, 0xdb}) {
		t.Errorf("%s is not an rpm (lead magic): %v", rpm, err)
	}
	if _, err := exec.LookPath("rpm"); err == nil {
		out, err := run(t, ".", nil, "rpm", "-qlp", rpm)
		if err != nil || !strings.Contains(out, "/usr/bin/joiner") || !strings.Contains(out, "/usr/lib/systemd/system/joiner-agent.service") {
			t.Errorf("rpm -qlp: %v\n%s", err, out)
		}
	}

	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Skip("dpkg not installed: deb install not tested")
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: dpkg --root install needs root (CI runs as root)")
	}
	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/updates", "var/lib/dpkg/info", "var/lib/dpkg/triggers", "var/log"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"var/lib/dpkg/status", "var/lib/dpkg/available"} {
		if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Maintainer scripts run outside a chroot with DPKG_ROOT set (the root
	// has no shell); ours do nothing then.
	dpkg := []string{"--root=" + root, "--log=/dev/null", "--force-script-chrootless", "--force-not-root"}
	if out, err := run(t, ".", nil, "dpkg", append(dpkg, "-i", deb)...); err != nil {
		t.Fatalf("dpkg -i: %v\n%s", err, out)
	}
	out, err := run(t, ".", nil, "dpkg-query", "--root="+root, "-W", "-f=${Status} ${Version}", "joiner")
	if err != nil || out != "install ok installed 1.2.3+test-1" {
		t.Errorf("dpkg-query: %v %q, want installed 1.2.3+test-1", err, out)
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{
		{"usr/bin/joiner", 0o755},
		{"usr/lib/systemd/system/joiner-agent.service", 0o644},
		{"usr/lib/systemd/system/joiner-bootstrap.service", 0o644},
		{"etc/default/joiner", 0o644},
		{"etc/joiner/bootstrap.json", 0o644},
		{"var/lib/joiner", 0o700 | os.ModeDir},
	} {
		st, err := os.Stat(filepath.Join(root, f.path))
		if err != nil {
			t.Errorf("/%s not installed: %v", f.path, err)
			continue
		}
		if st.Mode()&(os.ModeDir|os.ModePerm) != f.mode {
			t.Errorf("/%s mode %v, want %v", f.path, st.Mode(), f.mode)
		}
	}
	for _, u := range []string{"joiner-agent.service", "joiner-bootstrap.service"} {
		got, _ := os.ReadFile(filepath.Join(root, "usr/lib/systemd/system", u))
		want, _ := os.ReadFile(filepath.Join("systemd", u))
		if !bytes.Equal(got, want) {
			t.Errorf("installed %s differs from packaging/systemd/%s", u, u)
		}
	}
	conf, _ := os.ReadFile(filepath.Join(root, "var/lib/dpkg/info/joiner.conffiles"))
	for _, c := range []string{"/etc/default/joiner", "/etc/joiner/bootstrap.json"} {
		if !strings.Contains(string(conf), c) {
			t.Errorf("%s is not a conffile (kept across upgrades); conffiles: %q", c, conf)
		}
	}
	// The default bootstrap config is one `joiner bootstrap --from` accepts.
	var bj map[string]any
	if b, err := os.ReadFile(filepath.Join(root, "etc/joiner/bootstrap.json")); err != nil || yaml.Unmarshal(b, &bj) != nil || bj["version"] != float64(1) {
		t.Errorf("bootstrap.json: %v %v", err, bj)
	}
	if out, err := run(t, ".", nil, "dpkg", append(dpkg, "--purge", "joiner")...); err != nil {
		t.Errorf("dpkg --purge: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(root, "usr/bin/joiner")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("/usr/bin/joiner left after purge: %v", err)
	}
}
