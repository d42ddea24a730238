package manifests

import (
	"errors"
	"strings"
	"testing"
)

const workloads = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: data}
spec:
  replicas: 2
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: c, image: x}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: j}
spec:
  parallelism: 4
  completions: 2
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: x}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: cj}
spec:
  schedule: "* * * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: c, image: x}]
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs}
spec:
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec:
      containers: [{name: c, image: x}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ds}
spec:
  selector: {matchLabels: {app: ds}}
  template:
    metadata: {labels: {app: ds}}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]
---
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {topology.kubernetes.io/zone: us-east-1a}}
status:
  allocatable: {cpu: "4", memory: 8Gi, pods: "20"}
---
apiVersion: v1
kind: Pod
metadata: {name: bound}
spec:
  nodeName: n1
  containers: [{name: c, image: x}]
---
apiVersion: v1
kind: Service
metadata: {name: svc}
`

func TestLoadExpandsWorkloads(t *testing.T) {
	res, errs := Load([]File{{Name: "w.yaml", Data: []byte(workloads)}})
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	in := res.Input
	var names []string
	for _, p := range in.Pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	want := "default/web-0 default/web-1 default/web-2 data/db-0 data/db-1 default/j-0 default/j-1 default/cj-0 default/rs-0"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("pods\n got %s\nwant %s", got, want)
	}
	if len(in.DaemonSetPods) != 1 || len(in.Nodes) != 1 || len(in.Nodes[0].Pods) != 1 {
		t.Errorf("daemonsets %d, nodes %d", len(in.DaemonSetPods), len(in.Nodes))
	}
	if !res.DefaultNodePool || len(in.NodePools) != 1 || in.NodePools[0].Name != DefaultNodePoolName {
		t.Errorf("default NodePool not used: %+v", in.NodePools)
	}
	if len(in.InstanceTypes[DefaultNodeClassName]) == 0 {
		t.Error("no instance types for the default node class")
	}
}

func TestLoadLegacyProvisioner(t *testing.T) {
	doc := `apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: legacy}
spec:
  providerRef: {apiVersion: karpenter.k8s.aws/v1alpha1, kind: AWSNodeTemplate, name: tmpl}
  requirements:
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: tmpl}
spec:
  amiFamily: AL2
  instanceProfile: KarpenterNodeInstanceProfile
  subnetSelector: {karpenter.sh/discovery: demo}
  securityGroupSelector: {karpenter.sh/discovery: demo}
`
	res, errs := Load([]File{{Name: "legacy.yaml", Data: []byte(doc)}})
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	if len(res.Input.NodePools) != 1 || res.Input.NodePools[0].Name != "legacy" || res.DefaultNodePool {
		t.Fatalf("pools %+v", res.Input.NodePools)
	}
	if res.Input.NodeClasses["tmpl"] == nil {
		t.Fatalf("node class tmpl missing: %v", res.Input.NodeClasses)
	}
}

func TestLoadBadDocumentsKeepTheRest(t *testing.T) {
	doc := `apiVersion: v1
kind: Gizmo
metadata: {name: g}
---
apiVersion: v1
kind: Pod
metadata: {name: typo}
spec:
  containers: [{name: c, image: x, resourcez: {}}]
---
apiVersion: v1
kind: Pod
metadata: {name: good}
spec:
  containers: [{name: c, image: x}]
`
	res, errs := Load([]File{{Name: "bad.yaml", Data: []byte(doc)}})
	if len(errs) != 2 {
		t.Fatalf("want 2 errors, got %v", errs)
	}
	for _, e := range errs {
		if !errors.Is(e, ErrInput) {
			t.Errorf("%v does not wrap ErrInput", e)
		}
	}
	if !strings.Contains(errs[0].Error(), "unknown kind Gizmo") || !strings.Contains(errs[1].Error(), "resourcez") {
		t.Errorf("errors do not name the problem: %v", errs)
	}
	if len(res.Input.Pods) != 1 || res.Input.Pods[0].Name != "good" {
		t.Errorf("good pod lost: %v", res.Input.Pods)
	}
}

// TestLoadMalformedDocumentKeepsTheRest: a document that is not YAML is
// named (file, document, line) and the documents around it still load.
func TestLoadMalformedDocumentKeepsTheRest(t *testing.T) {
	doc := `apiVersion: v1
kind: Pod
metadata: {name: before}
spec:
  containers: [{name: c, image: x}]
---
kind: [
---
apiVersion: v1
kind: Pod
metadata: {name: after}
spec:
  containers: [{name: c, image: x}]
`
	res, errs := Load([]File{{Name: "bad.yaml", Data: []byte(doc)}})
	if len(errs) != 1 || !errors.Is(errs[0], ErrInput) || !strings.Contains(errs[0].Error(), "bad.yaml: document 2 (line 7)") {
		t.Fatalf("want one ErrInput naming bad.yaml document 2 (line 7), got %v", errs)
	}
	var names []string
	for _, p := range res.Input.Pods {
		names = append(names, p.Name)
	}
	if strings.Join(names, ",") != "before,after" {
		t.Errorf("pods %v, want before,after", names)
	}
}

func TestLoadDuplicatePool(t *testing.T) {
	doc := `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: a}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
`
	_, errs := Load([]File{{Name: "1.yaml", Data: []byte(doc)}, {Name: "2.yaml", Data: []byte(doc)}})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "defined twice") {
		t.Fatalf("want one duplicate error, got %v", errs)
	}
}
