package packaging_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// karpenterValues is Karpenter v1.14.1's own values.yaml, verbatim.
const karpenterValues = "testdata/karpenter-v1.14.1-values.yaml"

// renderRelease runs helm template on chart with a release name.
func renderRelease(t testing.TB, chart, release string, values []string, sets ...string) (string, error) {
	t.Helper()
	helm := tool(t, "helm")
	args := []string{"template", release, chart, "--namespace", "joiner", "--kube-version", kubeVersion, "--api-versions", monitoringAPI}
	for _, v := range values {
		args = append(args, "-f", v)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return run(t, ".", nil, helm, args...)
}

func readYAML(t testing.TB, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// schemaNode is the part of values.schema.json the key walk needs.
type schemaNode struct {
	Ref                  string                 `json:"$ref"`
	Properties           map[string]*schemaNode `json:"properties"`
	AdditionalProperties any                    `json:"additionalProperties"`
}

// karpenterKeys lists Karpenter's value keys (dotted paths) down to where
// our schema stops naming properties (free-form Kubernetes objects such as
// affinity, whose inner keys are the object's own).
func karpenterKeys(prefix string, v map[string]any, s *schemaNode, defs map[string]*schemaNode, out *[]string, missing *[]string) {
	for k, val := range v {
		path := strings.TrimPrefix(prefix+"."+k, ".")
		var child *schemaNode
		if s != nil && s.Properties != nil {
			child = s.Properties[k]
			if child == nil {
				*missing = append(*missing, path)
				continue
			}
			if child.Ref != "" {
				child = defs[strings.TrimPrefix(child.Ref, "#/definitions/")]
			}
		}
		*out = append(*out, path)
		if m, ok := val.(map[string]any); ok && child != nil && child.Properties != nil {
			karpenterKeys(path, m, child, defs, out, missing)
		}
	}
}

// hasPath reports whether the dotted path is a key of values.
func hasPath(values map[string]any, path string) bool {
	var cur any = values
	for _, k := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = m[k]; !ok {
			return false
		}
	}
	return true
}

// TestChartCoversKarpenterValues: every key of Karpenter v1.14's chart
// values is a key of ours (values.yaml and values.schema.json), so a
// Karpenter values file is never silently ignored: a key Joiner does not
// implement is refused at render when set (TestHelmTemplateRefusesUnsupported).
func TestChartCoversKarpenterValues(t *testing.T) {
	var schema struct {
		schemaNode
		Definitions map[string]*schemaNode `json:"definitions"`
	}
	b, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	if schema.AdditionalProperties != false || schema.Properties["settings"].AdditionalProperties != false {
		t.Errorf("values.schema.json: the top level and settings must refuse unknown keys (additionalProperties: false)")
	}
	karp := readYAML(t, karpenterValues)
	ours := readYAML(t, filepath.Join(chartDir, "values.yaml"))
	var keys, missing []string
	karpenterKeys("", karp, &schema.schemaNode, schema.Definitions, &keys, &missing)
	sort.Strings(keys)
	for _, k := range keys {
		if !hasPath(ours, k) {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("Karpenter's values without a counterpart (values.yaml / values.schema.json): %v", missing)
	}
	if len(keys) < 75 {
		t.Errorf("only %d of Karpenter's keys walked: %v", len(keys), keys)
	}
	t.Logf("%d Karpenter value keys have a counterpart", len(keys))
}

// TestHelmTemplateKarpenterValues: Karpenter's own default values file
// renders (with the cluster name Karpenter's chart requires too), and its
// values land where Karpenter's chart puts them.
func TestHelmTemplateKarpenterValues(t *testing.T) {
	out, err := render(t, []string{karpenterValues}, "settings.clusterName=karpenter-defaults")
	if err != nil {
		t.Fatalf("helm template -f %s: %v\n%s", karpenterValues, err, out)
	}
	objs := objects(t, out)
	var sts appsv1.StatefulSet
	into(t, find(objs, "StatefulSet", ""), &sts)
	ps := sts.Spec.Template.Spec
	c := ps.Containers[0]
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"--batch-idle-duration=1s", "--batch-max-duration=10s", "--ami-refresh-interval=1m",
		"--subnet-refresh-interval=1m", "--min-values-policy=Strict", "--log-level=info", "--bootstrap-expect=2",
		"--feature-gates=ReservedCapacity=true,SpotToSpotConsolidation=false,NodeRepair=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false"} {
		if !strings.Contains(args, want) {
			t.Errorf("coordinator args %q lack %q", args, want)
		}
	}
	if *sts.Spec.Replicas != 2 || c.Name != "controller" || !strings.HasPrefix(c.Image, "ghcr.io/joiner-dev/joiner:") {
		t.Errorf("replicas %d, container %s image %s: want Karpenter's 2 and controller, and Joiner's image", *sts.Spec.Replicas, c.Name, c.Image)
	}
	if ps.PriorityClassName != "system-cluster-critical" || ps.DNSPolicy != corev1.DNSClusterFirst || ps.NodeSelector["kubernetes.io/os"] != "linux" {
		t.Errorf("pod spec %s %s %v: want Karpenter's priority class, DNS policy and node selector", ps.PriorityClassName, ps.DNSPolicy, ps.NodeSelector)
	}
	// Karpenter's terms without a selector get the coordinators'.
	if len(ps.TopologySpreadConstraints) != 1 || ps.TopologySpreadConstraints[0].WhenUnsatisfiable != corev1.DoNotSchedule ||
		ps.TopologySpreadConstraints[0].LabelSelector == nil || ps.TopologySpreadConstraints[0].LabelSelector.MatchLabels["app.kubernetes.io/component"] != "coordinator" {
		t.Errorf("topology spread %+v: want Karpenter's zone constraint with the coordinators' selector", ps.TopologySpreadConstraints)
	}
	aa := ps.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	if len(aa) != 1 || aa[0].LabelSelector == nil || aa[0].LabelSelector.MatchLabels["app.kubernetes.io/component"] != "coordinator" {
		t.Errorf("anti-affinity %+v: want Karpenter's host term with the coordinators' selector", aa)
	}
	if find(objs, "PodDisruptionBudget", "karpenter") == nil {
		t.Error("no PodDisruptionBudget named karpenter (podDisruptionBudget.name)")
	}
}

// TestHelmTemplateKarpenterValueMapping: each of Karpenter's values set to
// something else than its default reaches the object or flag it means.
func TestHelmTemplateKarpenterValueMapping(t *testing.T) {
	tool(t, "helm")
	sts := func(t *testing.T, objs []*unstructured.Unstructured) appsv1.StatefulSet {
		var s appsv1.StatefulSet
		into(t, find(objs, "StatefulSet", ""), &s)
		return s
	}
	args := func(t *testing.T, objs []*unstructured.Unstructured) string {
		return strings.Join(sts(t, objs).Spec.Template.Spec.Containers[0].Args, " ")
	}
	for _, c := range []struct {
		name   string
		sets   []string
		values string // a values file's content, where --set cannot say it
		check  func(t *testing.T, objs []*unstructured.Unstructured) error
	}{
		{"settings reach flags", []string{"settings.batchIdleDuration=3s", "settings.batchMaxDuration=30s", "settings.interruptionQueue=q1",
			"settings.isolatedVPC=true", "settings.minValuesPolicy=BestEffort", "settings.clusterEndpoint=https://e", "settings.clusterCABundle=Q0E=",
			"settings.featureGates.spotToSpotConsolidation=true", "settings.amiRefreshInterval=3m", "settings.eksControlPlane=true",
			"settings.disableDryRun=true", "logLevel=debug"}, "",
			func(t *testing.T, objs []*unstructured.Unstructured) error {
				a := args(t, objs)
				for _, want := range []string{"--batch-idle-duration=3s", "--batch-max-duration=30s", "--interruption-queue=q1", "--isolated-vpc",
					"--min-values-policy=BestEffort", "--cluster-endpoint=https://e", "--cluster-ca-bundle=Q0E=", "SpotToSpotConsolidation=true",
					"--ami-refresh-interval=3m", "--log-level=debug"} {
					if !strings.Contains(a, want) {
						return fmt.Errorf("args %q lack %q", a, want)
					}
				}
				return nil
			}},
		{"settings are templates", nil, "settings: {clusterName: '{{ .Release.Name }}-cluster'}",
			func(t *testing.T, objs []*unstructured.Unstructured) error {
				if a := args(t, objs); !strings.Contains(a, "--cluster-name=joiner-cluster") {
					return fmt.Errorf("args %q: want the templated cluster name", a)
				}
				return nil
			}},
		{"serviceAccount.create=false and name", []string{"serviceAccount.create=false", "serviceAccount.name=karpenter"}, "",
			func(t *testing.T, objs []*unstructured.Unstructured) error {
				if find(objs, "ServiceAccount", "joiner-coordinator") != nil {
					return fmt.Errorf("coordinator ServiceAccount created with serviceAccount.create=false")
				}
				if got := sts(t, objs).Spec.Template.Spec.ServiceAccountName; got != "karpenter" {
					return fmt.Errorf("serviceAccountName %q, want karpenter", got)
				}
				var rb rbacv1.ClusterRoleBinding
				into(t, find(objs, "ClusterRoleBinding", "joiner-coordinator"), &rb)
				if rb.Subjects[0].Name != "karpenter" {
					return fmt.Errorf("ClusterRoleBinding subject %+v, want karpenter", rb.Subjects)
				}
				return nil
			}},
		{"serviceAccount annotations and name", []string{"serviceAccount.name=sa1", "serviceAccount.annotations.a=b"}, "",
			func(t *testing.T, objs []*unstructured.Unstructured) error {
				o := find(objs, "ServiceAccount", "sa1")
				if o == nil || o.GetAnnotations()["a"] != "b" {
					return fmt.Errorf("ServiceAccount sa1 with annotation a=b not rendered")
				}
				return nil
			}},
		{"pod settings", []string{"podAnnotations.pa=x", "podLabels.pl=y", "priorityClassName=p", "hostNetwork=true",
			"dnsConfig.options[0].name=ndots", "dnsConfig.options[0].value=1", "podSecurityContext.fsGroup=1000", "schedulerName=s",
			"terminationGracePeriodSeconds=90", "revisionHistoryLimit=3", "tolerations[0].operator=Exists",
			"nodeSelector.role=system", "affinity=null", "topologySpreadConstraints=null"}, "",
			func(t *testing.T, objs []*unstructured.Unstructured) error {
				s := sts(t, objs)
				ps := s.Spec.Template.Spec
				switch {
				case s.Spec.Template.Annotations["pa"] != "x" || s.Spec.Template.Labels["pl"] != "y":
					return fmt.Errorf("pod metadata %v %v", s.Spec.Template.Annotations, s.Spec.Template.Labels)
				case ps.PriorityClassName != "p" || !ps.HostNetwork || ps.DNSPolicy != corev1.DNSClusterFirstWithHostNet || ps.SchedulerName != "s":
					return fmt.Errorf("pod spec %s %v %s %s", ps.PriorityClassName, ps.HostNetwork, ps.DNSPolicy, ps.SchedulerName)
				case ps.DNSConfig == nil || len(ps.DNSConfig.Options) != 1 || *ps.SecurityContext.FSGroup != 1000:
					return fmt.Errorf("dnsConfig %+v / fsGroup %v", ps.DNSConfig, ps.SecurityContext.FSGroup)
				case *ps.TerminationGracePeriodSeconds != 90 || *s.Spec.RevisionHistoryLimit != 3:
					return fmt.Errorf("grace %d, history %d", *ps.TerminationGracePeriodSeconds, *s.Spec.RevisionHistoryLimit)
				case len(ps.Tolerations) != 1 || ps.Tolerations[0].Key != "" || ps.NodeSelector["role"] != "system":
					return fmt.Errorf("tolerations %+v, node selector %v", ps.Tolerations, ps.NodeSelector)
				case ps.Affinity != nil || len(ps.TopologySpreadConstraints) != 0:
					return fmt.Errorf("affinity %+v and spread %+v rendered although null", ps.Affinity, ps.TopologySpreadConstraints)
				}
				return nil
			}},
		{"container settings", []string{"controller.containerName=ctl", "controller.env[0].name=E", "controller.env[0].value=v",
			"controller.envFrom[0].configMapRef.name=cm", "controller.securityContext.seccompProfile.type=Localhost",
			"controller.securityContext.seccompProfile.localhostProfile=p.json", "controller.resources.requests.cpu=1",
			"extraVolumes[0].name=x", "extraVolumes[0].emptyDir.medium=Memory", "controller.extraVolumeMounts[0].name=x",
			"controller.extraVolumeMounts[0].mountPath=/x", "controller.sidecarContainer[0].name=side", "controller.sidecarContainer[0].image=busybox:1",
			"controller.sidecarVolumeMounts[0].name=x", "controller.sidecarVolumeMounts[0].mountPath=/y", "controller.metrics.port=9443",
			"imagePullPolicy=Always", "initContainers[0].name=init", "initContainers[0].image=busybox:1"}, "",
			func(t *testing.T, objs []*unstructured.Unstructured) error {
				ps := sts(t, objs).Spec.Template.Spec
				c := ps.Containers[0]
				env := map[string]string{}
				for _, e := range c.Env {
					env[e.Name] = e.Value
				}
				mounts := func(c corev1.Container) (out []string) {
					for _, m := range c.VolumeMounts {
						out = append(out, m.MountPath)
					}
					return out
				}
				switch {
				case c.Name != "ctl" || env["E"] != "v" || len(c.EnvFrom) != 1 || c.ImagePullPolicy != corev1.PullAlways:
					return fmt.Errorf("container %s env %v envFrom %v pull %s", c.Name, env, c.EnvFrom, c.ImagePullPolicy)
				case c.SecurityContext.SeccompProfile == nil || c.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost ||
					c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem:
					return fmt.Errorf("security context %+v: want the Localhost profile on the restricted context", c.SecurityContext)
				case c.Resources.Requests.Cpu().String() != "1":
					return fmt.Errorf("resources %+v", c.Resources)
				case !slices.Contains(mounts(c), "/x") || len(ps.Containers) != 2 || !slices.Equal(mounts(ps.Containers[1]), []string{"/x", "/y"}):
					return fmt.Errorf("mounts %v / sidecars %+v", mounts(c), ps.Containers[1:])
				case len(ps.InitContainers) != 1:
					return fmt.Errorf("init containers %+v", ps.InitContainers)
				case !strings.Contains(strings.Join(c.Args, " "), "--http-addr=$(POD_IP):9443") || c.Ports[0].ContainerPort != 9443:
					return fmt.Errorf("metrics port: args %v ports %+v", c.Args, c.Ports)
				}
				var svc corev1.Service
				into(t, find(objs, "Service", "joiner-coordinator"), &svc)
				if svc.Spec.Ports[0].Port != 9443 {
					return fmt.Errorf("client Service port %d, want 9443", svc.Spec.Ports[0].Port)
				}
				return nil
			}},
		{"labels, annotations, rules", []string{"additionalLabels.team=a", "additionalAnnotations.note=b", "service.annotations.svc=c",
			"additionalClusterRoleRules[0].apiGroups[0]=example.com", "additionalClusterRoleRules[0].resources[0]=widgets",
			"additionalClusterRoleRules[0].verbs[0]=get"}, "",
			func(t *testing.T, objs []*unstructured.Unstructured) error {
				for _, o := range objs {
					if o.GetKind() == "CustomResourceDefinition" {
						continue
					}
					if o.GetLabels()["team"] != "a" || o.GetAnnotations()["note"] != "b" {
						return fmt.Errorf("%s %s lacks the additional label or annotation: %v %v", o.GetKind(), o.GetName(), o.GetLabels(), o.GetAnnotations())
					}
				}
				if find(objs, "Service", "joiner-coordinator").GetAnnotations()["svc"] != "c" {
					return fmt.Errorf("client Service lacks service.annotations")
				}
				var cr rbacv1.ClusterRole
				into(t, find(objs, "ClusterRole", "joiner-coordinator"), &cr)
				if last := cr.Rules[len(cr.Rules)-1]; !slices.Equal(last.Resources, []string{"widgets"}) {
					return fmt.Errorf("last ClusterRole rule %+v, want the additional one", last)
				}
				return nil
			}},
		{"serviceMonitor", []string{"serviceMonitor.enabled=true", "serviceMonitor.additionalLabels.release=prom", "serviceMonitor.sampleLimit=1000",
			"serviceMonitor.relabelings[0].action=labeldrop", "serviceMonitor.relabelings[0].regex=pod",
			"serviceMonitor.metricRelabelings[0].action=drop", "serviceMonitor.metricRelabelings[0].regex=go_.*",
			"serviceMonitor.endpointConfig.scrapeTimeout=5s"}, "",
			func(t *testing.T, objs []*unstructured.Unstructured) error {
				sm := find(objs, "ServiceMonitor", "")
				if sm == nil || sm.GetLabels()["release"] != "prom" {
					return fmt.Errorf("ServiceMonitor missing or without its additional labels")
				}
				if n, _, _ := unstructured.NestedFieldNoCopy(sm.Object, "spec", "sampleLimit"); fmt.Sprint(n) != "1000" {
					return fmt.Errorf("sampleLimit %v, want 1000", n)
				}
				eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
				for _, e := range eps {
					m := e.(map[string]any)
					if m["scrapeTimeout"] != "5s" || len(m["relabelings"].([]any)) != 1 || len(m["metricRelabelings"].([]any)) != 1 {
						return fmt.Errorf("endpoint %v lacks the relabelings or endpointConfig", m)
					}
				}
				return nil
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			values := []string{filepath.Join(chartDir, "ci", "default-values.yaml")}
			if c.values != "" {
				f := filepath.Join(t.TempDir(), "values.yaml")
				if err := os.WriteFile(f, []byte(c.values), 0o644); err != nil {
					t.Fatal(err)
				}
				values = append(values, f)
			}
			out, err := render(t, values, c.sets...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			if err := c.check(t, objects(t, out)); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestHelmTemplateRefusesUnsupported: Karpenter values Joiner does not
// implement fail the render, naming the value; the schema refuses unknown
// keys (settings included).
func TestHelmTemplateRefusesUnsupported(t *testing.T) {
	tool(t, "helm")
	for _, c := range []struct {
		set, want string
	}{
		{"settings.vmMemoryOverheadPercent=0.1", "settings.vmMemoryOverheadPercent=0.1 is not supported"},
		{"settings.reservedENIs=1", "settings.reservedENIs=1 is not supported"},
		{"settings.enableZonalShift=true", "settings.enableZonalShift=true is not supported"},
		{"settings.ignoreDRARequests=false", "settings.ignoreDRARequests=false is not supported"},
		{"settings.disableClusterStateObservability=true", "settings.disableClusterStateObservability=true is not supported"},
		{"settings.preferencePolicy=Ignore", "settings.preferencePolicy=Ignore is not supported"},
		{"settings.featureGates.nodeRepair=true", "settings.featureGates.nodeRepair=true is not supported"},
		{"settings.featureGates.nodeOverlay=true", "settings.featureGates.nodeOverlay=true is not supported"},
		{"settings.featureGates.capacityBuffer=true", "settings.featureGates.capacityBuffer=true is not supported"},
		{"logOutputPaths={/var/log/joiner.log}", `logOutputPaths=["/var/log/joiner.log"] is not supported`},
		{"logErrorOutputPaths={stderr,/tmp/e}", "logErrorOutputPaths=[\"stderr\",\"/tmp/e\"] is not supported"},
		{"strategy.rollingUpdate.maxUnavailable=2", "is not supported: the coordinators are a StatefulSet"},
		{"strategy.type=Recreate", "is not supported: the coordinators are a StatefulSet"},
		{"controller.image.repository=registry.example/karpenter", "controller.image={\"digest\":\"\",\"repository\":\"registry.example/karpenter\",\"tag\":\"\"} is not supported"},
		{"controller.image.tag=1.14.1", "controller.image="},
		{"controller.healthProbe.port=9000", "controller.healthProbe.port=9000 is not supported"},
		{"settings.notAKarpenterSetting=1", "at '/settings': additional properties 'notAKarpenterSetting' not allowed"},
		{"notAKarpenterValue.enabled=true", "additional properties 'notAKarpenterValue' not allowed"},
		// The coordinators find their raft peers by cluster DNS.
		{"dnsPolicy=Default", "dnsPolicy=Default is not supported: the coordinators find their raft peers by cluster DNS names"},
		{"dnsPolicy=None", "dnsPolicy=None needs dnsConfig.nameservers"},
		{"dnsPolicy=None,dnsConfig.options[0].name=ndots", "dnsPolicy=None needs dnsConfig.nameservers"},
		// A request above its limit: the API server would refuse the pod template.
		{"controller.resources.requests.memory=2Gi,controller.resources.limits.memory=1Gi",
			"controller.resources.requests.memory=2Gi exceeds controller.resources.limits.memory=1Gi"},
		{"controller.resources.requests.cpu=1500m,controller.resources.limits.cpu=1.2",
			"controller.resources.requests.cpu=1500m exceeds controller.resources.limits.cpu=1.2"},
		{"agent.resources.requests.memory=256Mi", "agent.resources.requests.memory=256Mi exceeds agent.resources.limits.memory=128Mi"},
		{"controller.resources.requests.memory=lots,controller.resources.limits.memory=1Gi", "controller.resources.requests.memory=lots is not a Kubernetes quantity"},
		// Karpenter's environment settings: joiner coordinator reads none.
		{"controller.env[0].name=CLUSTER_NAME,controller.env[0].value=c", "controller.env CLUSTER_NAME is Karpenter's setting, which joiner coordinator does not read: set settings.clusterName instead"},
		{"controller.env[0].name=EXTRA,controller.env[1].name=INTERRUPTION_QUEUE,controller.env[1].value=q", "controller.env INTERRUPTION_QUEUE is Karpenter's setting, which joiner coordinator does not read: set settings.interruptionQueue instead"},
		{"controller.env[0].name=FEATURE_GATES,controller.env[0].value=x", "set settings.featureGates.* instead"},
		{"controller.env[0].name=LOG_LEVEL,controller.env[0].value=debug", "controller.env LOG_LEVEL is Karpenter's setting, which joiner coordinator does not read: set logLevel instead"},
		{"controller.env[0].name=KUBE_CLIENT_QPS,controller.env[0].value=50", "set settings.kubeClientQPS instead"},
		{"controller.env[0].name=MEMORY_LIMIT,controller.env[0].value=1", "set controller.resources.limits.memory"},
		{"controller.env[0].name=DISABLE_DRY_RUN,controller.env[0].value=true", "set settings.disableDryRun instead"},
		{"controller.env[0].name=DISABLE_LEADER_ELECTION,controller.env[0].value=true", "controller.env DISABLE_LEADER_ELECTION is Karpenter's setting and is not supported"},
		// Only the agent's own drain deletes pods still blocked after forceAfter.
		{"interruption.forceAfter=10m", "interruption.forceAfter=10m needs agent.localDrain=true"},
		{"settings.batchIdleDuration=soon", "/settings/batchIdleDuration"},
		{"logLevel=verbose", "/logLevel"},
	} {
		t.Run(c.set, func(t *testing.T) {
			out, err := render(t, []string{filepath.Join(chartDir, "ci", "default-values.yaml")}, c.set)
			if err == nil || !strings.Contains(out, c.want) {
				t.Errorf("helm template --set %s: err %v, want a failure containing %q, output:\n%.2000s", c.set, err, c.want, out)
			}
		})
	}
	// What Joiner behaves as is accepted.
	for _, set := range []string{"settings.disableDryRun=true", "settings.eksControlPlane=true", "logOutputPaths={stdout}",
		"controller.healthProbe.port=8080", "controller.image.repository=public.ecr.aws/karpenter/controller", "settings.reservedENIs=0",
		"dnsPolicy=None,dnsConfig.nameservers={10.100.0.10}", "dnsPolicy=ClusterFirstWithHostNet",
		// A Karpenter values file raising the memory request: no default limit is left below it.
		"controller.resources.requests.memory=2Gi", "controller.resources.requests.memory=1Gi,controller.resources.limits.memory=1024Mi",
		"controller.resources.requests.cpu=0.5,controller.resources.limits.cpu=500m", "controller.resources.limits.cpu=1e3",
		"controller.env[0].name=AWS_STS_REGIONAL_ENDPOINTS,controller.env[0].value=regional",
		"interruption.forceAfter=10m,agent.localDrain=true", "interruption.forceAfter=0m0s"} {
		if out, err := render(t, []string{filepath.Join(chartDir, "ci", "default-values.yaml")}, set); err != nil {
			t.Errorf("helm template --set %s: %v\n%s", set, err, out)
		}
	}
}

// TestHelmTemplateLongReleaseName: with Helm's longest release name (53
// characters) and a 63-character fullnameOverride every name is valid:
// Services and pod hostnames are DNS labels, the StatefulSet's revision
// label (<name>-<hash>) fits in 63 characters.
func TestHelmTemplateLongReleaseName(t *testing.T) {
	tool(t, "helm")
	long := strings.Repeat("a", 24) + "-" + strings.Repeat("b", 28) // 53
	for _, c := range []struct {
		name    string
		release string
		sets    []string
	}{
		{"53-character release", long, nil},
		{"63-character fullnameOverride", "joiner", []string{"fullnameOverride=" + strings.Repeat("x", 62) + "y"}},
		{"release containing the chart name", "joiner-" + strings.Repeat("c", 46), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := renderRelease(t, chartDir, c.release, []string{filepath.Join(chartDir, "ci", "full-values.yaml")}, append(c.sets, "replicas=5")...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			objs := objects(t, out)
			for _, o := range objs {
				name := o.GetName()
				var errs []string
				switch o.GetKind() {
				case "Service":
					errs = validation.IsDNS1035Label(name)
				case "StatefulSet":
					// controller-revision-hash=<name>-<up to 10 characters>.
					errs = append(validation.IsDNS1123Label(name), validation.IsValidLabelValue(name+"-0123456789")...)
					var sts appsv1.StatefulSet
					into(t, o, &sts)
					for i := range int(*sts.Spec.Replicas) {
						errs = append(errs, validation.IsDNS1123Label(fmt.Sprintf("%s-%d", name, i))...)
					}
					if find(objs, "Service", sts.Spec.ServiceName) == nil {
						errs = append(errs, "no headless Service "+sts.Spec.ServiceName)
					}
				default:
					errs = validation.IsDNS1123Subdomain(name)
					if len(name) > 63 {
						errs = append(errs, "longer than 63 characters")
					}
				}
				for k, v := range o.GetLabels() {
					errs = append(errs, validation.IsValidLabelValue(v)...)
					errs = append(errs, validation.IsQualifiedName(k)...)
				}
				if len(errs) > 0 {
					t.Errorf("%s %q (%d characters): %v", o.GetKind(), name, len(name), errs)
				}
			}
		})
	}
}

// TestHelmTemplatePersistence: the raft PVC's StorageClass (empty: the
// cluster default, "-": none) and the emptyDir mode for test clusters.
func TestHelmTemplatePersistence(t *testing.T) {
	tool(t, "helm")
	empty := ""
	for _, c := range []struct {
		name     string
		sets     []string
		class    *string // nil: no storageClassName
		emptyDir bool
	}{
		{"default: the cluster's default class", nil, nil, false},
		{"gp3", []string{"coordinator.persistence.storageClassName=gp3"}, func() *string { s := "gp3"; return &s }(), false},
		{"- : no class", []string{"coordinator.persistence.storageClassName=-"}, &empty, false},
		{"emptyDir for test clusters", []string{"coordinator.persistence.enabled=false"}, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := renderDefault(t, c.sets...)
			var sts appsv1.StatefulSet
			into(t, find(objects(t, out), "StatefulSet", ""), &sts)
			var data *corev1.Volume
			for i, v := range sts.Spec.Template.Spec.Volumes {
				if v.Name == "data" {
					data = &sts.Spec.Template.Spec.Volumes[i]
				}
			}
			if c.emptyDir {
				if len(sts.Spec.VolumeClaimTemplates) != 0 || data == nil || data.EmptyDir == nil {
					t.Errorf("claims %d, data volume %+v: want no claim and an emptyDir", len(sts.Spec.VolumeClaimTemplates), data)
				}
				return
			}
			if data != nil || len(sts.Spec.VolumeClaimTemplates) != 1 {
				t.Fatalf("data volume %+v, %d claims: want one claim template", data, len(sts.Spec.VolumeClaimTemplates))
			}
			if got := sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName; !reflect.DeepEqual(got, c.class) {
				t.Errorf("storageClassName %v, want %v", ptrString(got), ptrString(c.class))
			}
		})
	}
}

func ptrString(p *string) string {
	if p == nil {
		return "<unset>"
	}
	return fmt.Sprintf("%q", *p)
}

// TestHelmNotes: the status command in NOTES reaches the coordinator where
// it listens (its pod IP, through its stable DNS name, which its
// certificate carries), never 127.0.0.1. NOTES is rendered as a template of
// a copy of the chart (helm template does not print NOTES).
func TestHelmNotes(t *testing.T) {
	helm := tool(t, "helm")
	dir := filepath.Join(t.TempDir(), "joiner")
	if out, err := run(t, ".", nil, "cp", "-r", chartDir, dir); err != nil {
		t.Fatalf("copying the chart: %v\n%s", err, out)
	}
	notes, err := os.ReadFile(filepath.Join(dir, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	wrapped := "{{- define \"test.notes\" }}" + string(notes) + "{{- end }}\nnotes: {{ include \"test.notes\" . | toJson }}\n"
	if err := os.WriteFile(filepath.Join(dir, "templates", "zz-notes.yaml"), []byte(wrapped), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "templates", "NOTES.txt"))
	get := func(t *testing.T, values string, sets ...string) string {
		args := []string{"template", "joiner", dir, "--namespace", "joiner", "--kube-version", kubeVersion, "-f", values, "--show-only", "templates/zz-notes.yaml"}
		for _, s := range sets {
			if strings.HasPrefix(s, "--") { // a helm flag, e.g. --api-versions=...
				args = append(args, s)
				continue
			}
			args = append(args, "--set", s)
		}
		out, err := run(t, ".", nil, helm, args...)
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, out)
		}
		var doc struct {
			Notes string `json:"notes"`
		}
		for _, d := range strings.Split(out, "\n---") {
			if err := yaml.Unmarshal([]byte(d), &doc); err == nil && doc.Notes != "" {
				return doc.Notes
			}
		}
		t.Fatalf("no notes in:\n%s", out)
		return ""
	}
	n := get(t, filepath.Join(chartDir, "ci", "default-values.yaml"))
	want := "kubectl -n joiner exec joiner-coordinator-0 -c coordinator -- joiner status --addr https://joiner-coordinator-0.joiner-coordinator-peers.joiner.svc.cluster.local:8080"
	if !strings.Contains(n, want) || strings.Contains(n, "127.0.0.1 ") || strings.Contains(n, "WARNING") {
		t.Errorf("NOTES:\n%s\nwant the status command %q and no warning", n, want)
	}
	for _, w := range []string{"joiner status -n joiner\n", "token of ServiceAccount joiner-coordinator-status (audience joiner-status)",
		"the Role joiner-coordinator-status-reader", "statusReaders value", "No one is bound yet."} {
		if !strings.Contains(n, w) {
			t.Errorf("NOTES lack %q:\n%s", w, n)
		}
	}
	if n = get(t, filepath.Join(chartDir, "ci", "default-values.yaml"), "statusReaders[0].kind=Group", "statusReaders[0].name=oncall"); strings.Contains(n, "No one is bound") {
		t.Errorf("NOTES with statusReaders say no one is bound:\n%s", n)
	}
	if n = get(t, filepath.Join(chartDir, "ci", "default-values.yaml"), "serviceMonitor.enabled=true"); !strings.Contains(n, "ClusterRole joiner-metrics-reader") ||
		!strings.Contains(n, "No metrics reader is bound yet: the ServiceMonitor's scrapes are refused (403)") {
		t.Errorf("NOTES with a ServiceMonitor and no metricsReaders do not say scrapes are refused:\n%s", n)
	}
	if n = get(t, filepath.Join(chartDir, "ci", "default-values.yaml"), "serviceMonitor.enabled=true"); !strings.Contains(n, "no ServiceMonitor was created") {
		t.Errorf("NOTES with serviceMonitor.enabled and no monitoring.coreos.com/v1 do not say no ServiceMonitor was created:\n%s", n)
	}
	if n = get(t, filepath.Join(chartDir, "ci", "default-values.yaml"), "serviceMonitor.enabled=true", "--api-versions="+monitoringAPI); strings.Contains(n, "no ServiceMonitor") {
		t.Errorf("NOTES with monitoring.coreos.com/v1 served say no ServiceMonitor was created:\n%s", n)
	}
	if n = get(t, filepath.Join(chartDir, "ci", "default-values.yaml"), "metricsReaders[0].kind=ServiceAccount", "metricsReaders[0].name=prometheus"); strings.Contains(n, "No metrics reader") {
		t.Errorf("NOTES with metricsReaders say no one is bound:\n%s", n)
	}
	n = get(t, karpenterValues, "settings.clusterName=x")
	for _, w := range []string{"-c controller", "replicas=2 is even", "controller.image (public.ecr.aws/karpenter/controller) is Karpenter's controller image and is not used"} {
		if !strings.Contains(n, w) {
			t.Errorf("NOTES with Karpenter's values lack %q:\n%s", w, n)
		}
	}
	if n = get(t, filepath.Join(chartDir, "ci", "default-values.yaml"), "coordinator.persistence.enabled=false", "crds.install=false"); !strings.Contains(n, "emptyDir") || !strings.Contains(n, "joiner-crd") {
		t.Errorf("NOTES without persistence or CRDs lack the warnings:\n%s", n)
	}
}

// TestHelmTemplateProdExample: the production example renders as its
// comments say (examples/clusters/prod-us-west-2).
func TestHelmTemplateProdExample(t *testing.T) {
	out, err := render(t, []string{filepath.Join("helm", "examples", "clusters", "prod-us-west-2", "values.yaml")})
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	objs := objects(t, out)
	var sts appsv1.StatefulSet
	into(t, find(objs, "StatefulSet", ""), &sts)
	ps := sts.Spec.Template.Spec
	args := strings.Join(ps.Containers[0].Args, " ")
	for _, want := range []string{"--cluster-name=prod-us-west-2", "--interruption-queue=prod-us-west-2-joiner", "--bootstrap-expect=3"} {
		if !strings.Contains(args, want) {
			t.Errorf("coordinator args %q lack %q", args, want)
		}
	}
	if c := sts.Spec.VolumeClaimTemplates[0].Spec.StorageClassName; c == nil || *c != "gp3" {
		t.Errorf("storageClassName %v, want gp3", ptrString(c))
	}
	if len(ps.TopologySpreadConstraints) != 1 || ps.TopologySpreadConstraints[0].WhenUnsatisfiable != corev1.DoNotSchedule {
		t.Errorf("topology spread %+v, want the zone constraint with DoNotSchedule", ps.TopologySpreadConstraints)
	}
	if find(objs, "ServiceMonitor", "") == nil || find(objs, "CustomResourceDefinition", "nodepools.karpenter.sh") == nil {
		t.Error("the prod example renders no ServiceMonitor or no CRDs")
	}
	var sa corev1.ServiceAccount
	into(t, find(objs, "ServiceAccount", "joiner-coordinator"), &sa)
	if sa.Annotations["eks.amazonaws.com/role-arn"] != "arn:aws:iam::111122223333:role/JoinerController-prod-us-west-2" {
		t.Errorf("IRSA annotation %v", sa.Annotations)
	}
}

// TestHelmTemplateServiceMonitorNeedsTheAPI: as Karpenter's chart, the
// ServiceMonitor renders only where the cluster serves
// monitoring.coreos.com/v1 (helm template: --api-versions), so enabling it
// on a cluster without the Prometheus Operator does not fail the install.
func TestHelmTemplateServiceMonitorNeedsTheAPI(t *testing.T) {
	helm := tool(t, "helm")
	for _, c := range []struct {
		name string
		apis []string
		want bool
	}{
		{"without monitoring.coreos.com/v1", nil, false},
		{"with another version only", []string{"monitoring.coreos.com/v1alpha1"}, false},
		{"with monitoring.coreos.com/v1", []string{monitoringAPI}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"template", "joiner", chartDir, "--namespace", "joiner", "--kube-version", kubeVersion,
				"-f", filepath.Join(chartDir, "ci", "default-values.yaml"), "--set", "serviceMonitor.enabled=true"}
			for _, a := range c.apis {
				args = append(args, "--api-versions", a)
			}
			out, err := run(t, ".", nil, helm, args...)
			if err != nil {
				t.Fatalf("helm template: %v\n%s", err, out)
			}
			if got := find(objects(t, out), "ServiceMonitor", "") != nil; got != c.want {
				t.Errorf("ServiceMonitor rendered: %v, want %v", got, c.want)
			}
		})
	}
}

// TestHelmTemplateKarpenterV1_0Values: a values file of Karpenter v1.0,
// with its webhook.* and postInstallHook.* (Karpenter v1.14 ignores them),
// installs; they change nothing.
func TestHelmTemplateKarpenterV1_0Values(t *testing.T) {
	f := filepath.Join(t.TempDir(), "values.yaml")
	const v10 = `settings:
  clusterName: v1-0
webhook:
  enabled: true
  port: 8443
  metrics:
    port: 8001
postInstallHook:
  image:
    repository: public.ecr.aws/bitnami/kubectl
    tag: "1.30"
    digest: sha256:13a2ad1bd37ce42ee2a6f1ab0d30595f42eb7fe4a90d6ec848550524104a1ed6
`
	if err := os.WriteFile(f, []byte(v10), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := render(t, []string{f})
	if err != nil {
		t.Fatalf("helm template -f (Karpenter v1.0 values): %v\n%s", err, out)
	}
	if want := renderDefault(t, "settings.clusterName=v1-0"); out != want {
		t.Errorf("webhook.* and postInstallHook.* changed the rendered chart")
	}
}

// TestHelmTemplateCoordinatorRBAC: the coordinators' RBAC next to
// Karpenter's: they delete pods still on a node before its NodeClaim's
// terminationGracePeriod ends (cluster-wide, as Karpenter), use no Lease
// (raft elects the leader), and admins may manage Karpenter's objects
// through an aggregated ClusterRole, as with Karpenter's chart.
func TestHelmTemplateCoordinatorRBAC(t *testing.T) {
	objs := objects(t, renderDefault(t))
	var cr rbacv1.ClusterRole
	into(t, find(objs, "ClusterRole", "joiner-coordinator"), &cr)
	grants := func(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
		for _, r := range rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) && len(r.ResourceNames) == 0 {
				return true
			}
		}
		return false
	}
	for _, want := range [][3]string{{"", "pods", "delete"}, {"", "pods/eviction", "create"}} {
		if !grants(cr.Rules, want[0], want[1], want[2]) {
			t.Errorf("ClusterRole joiner-coordinator does not grant %s on %s: %+v", want[2], want[1], cr.Rules)
		}
	}
	for _, o := range objs {
		if o.GetNamespace() == "kube-node-lease" {
			t.Errorf("%s %s in kube-node-lease: the coordinators use no Lease", o.GetKind(), o.GetName())
		}
		if k := o.GetKind(); k != "ClusterRole" && k != "Role" {
			continue
		}
		var r rbacv1.ClusterRole
		into(t, o, &r)
		for _, rule := range r.Rules {
			if slices.Contains(rule.APIGroups, "coordination.k8s.io") {
				t.Errorf("%s %s grants %v on coordination.k8s.io %v: the coordinators use no Lease", o.GetKind(), o.GetName(), rule.Verbs, rule.Resources)
			}
		}
	}

	// The kube-dns Service's cluster IP (nodes' cluster DNS), by name only,
	// as Karpenter's chart grants it.
	if find(objs, "Role", "joiner-coordinator-dns") == nil || find(objs, "RoleBinding", "joiner-coordinator-dns") == nil {
		t.Fatal("no Role and RoleBinding joiner-coordinator-dns: the coordinators cannot read the kube-dns Service")
	}
	var dns rbacv1.Role
	into(t, find(objs, "Role", "joiner-coordinator-dns"), &dns)
	if dns.Namespace != "kube-system" || len(dns.Rules) != 1 || !slices.Equal(dns.Rules[0].Resources, []string{"services"}) ||
		!slices.Equal(dns.Rules[0].ResourceNames, []string{"kube-dns"}) || !slices.Equal(dns.Rules[0].Verbs, []string{"get"}) {
		t.Errorf("Role joiner-coordinator-dns = %s %+v, want get on kube-system's kube-dns Service only", dns.Namespace, dns.Rules)
	}
	var dnsBinding rbacv1.RoleBinding
	into(t, find(objs, "RoleBinding", "joiner-coordinator-dns"), &dnsBinding)
	if dnsBinding.Namespace != "kube-system" || dnsBinding.RoleRef.Name != "joiner-coordinator-dns" || len(dnsBinding.Subjects) != 1 ||
		dnsBinding.Subjects[0].Name != "joiner-coordinator" {
		t.Errorf("RoleBinding joiner-coordinator-dns = %+v", dnsBinding)
	}

	o := find(objs, "ClusterRole", "joiner-admin")
	if o == nil {
		t.Fatal("no aggregated ClusterRole joiner-admin")
	}
	var admin rbacv1.ClusterRole
	into(t, o, &admin)
	if admin.Labels["rbac.authorization.k8s.io/aggregate-to-admin"] != "true" || admin.Labels["app.kubernetes.io/instance"] != "joiner" {
		t.Errorf("joiner-admin labels %v: want aggregate-to-admin and the release's labels", admin.Labels)
	}
	for _, res := range [][2]string{{"karpenter.sh", "nodepools"}, {"karpenter.sh", "nodepools/status"}, {"karpenter.sh", "nodeclaims"},
		{"karpenter.sh", "nodeclaims/status"}, {"karpenter.k8s.aws", "ec2nodeclasses"}} {
		for _, verb := range []string{"get", "list", "watch", "create", "delete", "patch"} {
			if !grants(admin.Rules, res[0], res[1], verb) {
				t.Errorf("joiner-admin does not grant %s on %s/%s: %+v", verb, res[0], res[1], admin.Rules)
			}
		}
	}
	if len(admin.Rules) != 2 {
		t.Errorf("joiner-admin has %d rules, want Karpenter's 2: %+v", len(admin.Rules), admin.Rules)
	}
	if objs := objects(t, renderDefault(t, "rbac.create=false")); find(objs, "ClusterRole", "joiner-admin") != nil {
		t.Error("joiner-admin rendered with rbac.create=false")
	}
}
