package termination_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
	"github.com/joiner-dev/joiner/coordinator/fsm"
	"github.com/joiner-dev/joiner/coordinator/fsm/fsmtest"
	"github.com/joiner-dev/joiner/coordinator/kube"
	"github.com/joiner-dev/joiner/coordinator/termination"
	"github.com/joiner-dev/joiner/test/kubetest"
	"github.com/joiner-dev/joiner/test/observe"
	"github.com/joiner-dev/joiner/test/testenv"
)

// On a real control plane, an adopted NodeClaim (its instance unknown to
// raft) whose Node has a VolumeAttachment is drained, then waits with
// VolumesDetached Unknown and the instance running; once the attachment is
// deleted (the attach-detach controller's job) the instance is terminated
// and the NodeClaim released. The VolumeAttachment comes from the
// coordinator's informer cache.
func TestTerminationWaitsForVolumeAttachmentRealControlPlane(t *testing.T) {
	env := testenv.Start(t, testenv.Options{CRDs: true})
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	c := env.Client
	const nodeName, instance, attachmentName = "node-vol", "i-0vol", "csi-0123456789abcdef"
	providerID := "aws:///us-east-1b/" + instance
	kubetest.RegisterNode(ctx, t, c, nodeName, providerID, []string{karpv1.TerminationFinalizer})
	pv := "pvc-0f1e2d3c"
	if _, err := c.StorageV1().VolumeAttachments().Create(ctx, &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: attachmentName},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: nodeName,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	clients, err := kube.NewClients(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	created, err := clients.CreateNodeClaim(ctx, &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "adopted-vol", Finalizers: []string{karpv1.TerminationFinalizer}},
		Spec: karpv1.NodeClaimSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable,
				Operator: karpv1.NodeSelectorOperator(corev1.NodeSelectorOpIn), Values: []string{"amd64"}}},
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.ProviderID, created.Status.NodeName = providerID, nodeName
	if _, err := clients.UpdateNodeClaimStatus(ctx, created); err != nil {
		t.Fatal(err)
	}

	log := zaptest.NewLogger(t)
	cache := kube.NewCache(clients, log)
	wg.Add(1)
	go func() { defer wg.Done(); _ = cache.Run(ctx) }()
	if err := cache.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	state := fsm.New()
	cloud := &observe.Terminations{}
	ctrl, err := termination.New(termination.Config{Resync: 500 * time.Millisecond}, termination.Deps{Cache: cache, Claims: clients,
		Kube: c, State: state, Raft: fsmtest.New(state), Cloud: cloud, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = ctrl.Run(ctx) }()

	if err := clients.DeleteNodeClaim(ctx, created.Name); err != nil {
		t.Fatal(err)
	}
	volumes := func() *metav1.Condition {
		nc, err := clients.GetNodeClaim(ctx, created.Name)
		if err != nil {
			return nil
		}
		return meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionVolumesDetached)
	}
	kubetest.WaitFor(t, 2*time.Minute, "VolumesDetached Unknown (awaiting the attachment)", func() bool {
		c := volumes()
		return c != nil && c.Status == metav1.ConditionUnknown && c.Reason == "AwaitingVolumeDetachment"
	})
	if got := cloud.IDs(); len(got) != 0 {
		t.Fatalf("terminated %v while %s exists", got, attachmentName)
	}
	if _, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err != nil {
		t.Fatalf("node while waiting for volumes: %v", err)
	}

	if err := c.StorageV1().VolumeAttachments().Delete(ctx, attachmentName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.WaitFor(t, 2*time.Minute, "nodeclaim released", func() bool {
		_, err := clients.GetNodeClaim(ctx, created.Name)
		return apierrors.IsNotFound(err)
	})
	if got := cloud.IDs(); len(got) != 1 || got[0] != instance {
		t.Errorf("terminate calls %v, want [%s]", got, instance)
	}
	if _, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node: %v, want not found", err)
	}
}
