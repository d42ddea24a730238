package sim

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/cloud/catalog"
	"github.com/joiner-dev/joiner/userdata"
)

// nodeFor builds the Node a booted instance registers: the labels, taints
// and max pods its rendered user data gives kubelet, the instance type's
// well-known labels and capacity, and providerID aws:///<zone>/<id>.
func (s *Sim) nodeFor(in instance) (*corev1.Node, error) {
	family := userdata.FamilyAL2023
	if im, ok := s.image(in.ImageID); ok && im.Family != "" {
		family = im.Family
	}
	var facts userdata.NodeFacts
	if len(in.UserData) > 0 { // without user data: only the well-known labels
		var err error
		facts, err = userdata.Parse(family, in.UserData)
		// An EKS image whose user data never calls its bootstrap does not
		// join; a custom image may join by means of its own.
		if err != nil && !(errors.Is(err, userdata.ErrNoFacts) && family == userdata.FamilyCustom) {
			return nil, fmt.Errorf("reading %s user data of %s: %w", family, in.ID, err)
		}
	}
	var it *catalog.InstanceType
	for _, t := range catalog.InstanceTypes(catalog.Options{Region: s.cfg.Region, Zones: s.cfg.Zones}) {
		if t.Name == in.Type {
			it = t
			break
		}
	}
	if it == nil {
		return nil, fmt.Errorf("instance type %s of %s: not in the catalogue", in.Type, in.ID)
	}
	labels := map[string]string{}
	for k, v := range it.Labels {
		labels[k] = v
	}
	for k, v := range facts.Labels {
		labels[k] = v
	}
	capType := karpv1.CapacityTypeOnDemand
	if in.Lifecycle == "spot" {
		capType = karpv1.CapacityTypeSpot
	}
	labels[corev1.LabelTopologyZone] = in.Zone
	labels[corev1.LabelTopologyRegion] = s.cfg.Region
	labels[corev1.LabelHostname] = in.NodeName
	labels[corev1.LabelOSStable] = "linux"
	labels[karpv1.LabelCapacityType] = capType
	capacity := corev1.ResourceList{}
	for k, v := range it.Capacity {
		capacity[k] = v.DeepCopy()
	}
	alloc := it.Allocatable()
	// The EFA device plugin registers one vpc.amazonaws.com/efa per EFA
	// interface the instance was launched with.
	efa := 0
	for _, ni := range in.NIs {
		if ni.Type == "efa" || ni.Type == "efa-only" {
			efa++
		}
	}
	if efa > 0 {
		capacity[awsv1.ResourceEFA] = *resource.NewQuantity(int64(efa), resource.DecimalSI)
		alloc[awsv1.ResourceEFA] = *resource.NewQuantity(int64(efa), resource.DecimalSI)
	}
	// The kubelet takes the lower of maxPods and podsPerCore x vCPUs.
	cpu := it.Capacity[corev1.ResourceCPU]
	if pods := facts.PodCapacity(int32(cpu.Value())); pods > 0 {
		capacity[corev1.ResourcePods] = *resource.NewQuantity(int64(pods), resource.DecimalSI)
		alloc[corev1.ResourcePods] = *resource.NewQuantity(int64(pods), resource.DecimalSI)
	}
	now := metav1.NewTime(s.now())
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: in.NodeName, Labels: labels,
			Annotations: map[string]string{karpv1.AnnotationSimInstance: in.ID}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///" + in.Zone + "/" + in.ID, Taints: facts.Taints},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: alloc,
			Conditions: []corev1.NodeCondition{readyCondition(now)},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: in.PrivateIP},
				{Type: corev1.NodeHostName, Address: in.NodeName},
				{Type: corev1.NodeInternalDNS, Address: in.NodeName},
			},
			NodeInfo: corev1.NodeSystemInfo{OperatingSystem: "linux", Architecture: labels[corev1.LabelArchStable],
				KubeletVersion: "v" + DefaultKubernetesVersion + ".0", ContainerRuntimeVersion: "containerd://2.0.0",
				MachineID: in.ID, SystemUUID: in.ID, BootID: in.ID + "-" + strconv.FormatInt(in.LaunchTime.Unix(), 10)},
		},
	}, nil
}

func readyCondition(now metav1.Time) corev1.NodeCondition {
	return corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		Message: "kubelet is posting ready status (joiner sim)", LastHeartbeatTime: now, LastTransitionTime: now}
}

func (s *Sim) registerNode(ctx context.Context, in instance) error {
	node, err := s.nodeFor(in)
	if err != nil {
		return err
	}
	status := node.Status
	created, err := s.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = s.kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
	}
	if err != nil {
		return fmt.Errorf("creating node %s: %w", node.Name, err)
	}
	// The coordinator may update the new Node (labels, taints, finalizer)
	// between the create and the status write: re-read and retry.
	for attempt := 0; ; attempt++ {
		created.Status = status
		_, err := s.kube.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt == 4 {
			return fmt.Errorf("setting status of node %s: %w", node.Name, err)
		}
		if created, err = s.kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("setting status of node %s: %w", node.Name, err)
		}
	}
}

func (s *Sim) heartbeat(ctx context.Context, in instance) error {
	node, err := s.kube.CoreV1().Nodes().Get(ctx, in.NodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("getting node %s: %w", in.NodeName, err)
	}
	now := metav1.NewTime(s.now())
	found := false
	for i := range node.Status.Conditions {
		c := &node.Status.Conditions[i]
		if c.Type == corev1.NodeReady {
			found = true
			c.LastHeartbeatTime = now
			if c.Status != corev1.ConditionTrue {
				*c = readyCondition(now)
			}
		}
	}
	if !found {
		node.Status.Conditions = append(node.Status.Conditions, readyCondition(now))
	}
	if _, err := s.kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("renewing node %s: %w", in.NodeName, err)
	}
	return nil
}

func (s *Sim) deleteNode(ctx context.Context, in instance) error {
	err := s.kube.CoreV1().Nodes().Delete(ctx, in.NodeName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting node %s: %w", in.NodeName, err)
	}
	return nil
}
