// Package events is the one vocabulary of the Kubernetes Events Joiner
// records, and the one recorder per process that sends them.
//
// Where Joiner does what Karpenter v1.14 (or its AWS provider) does, the
// Event has Karpenter's reason, type, message and object, so `kubectl get
// events --field-selector reason=DisruptionBlocked`, `kubectl describe`
// and alerts written for Karpenter carry over; reasons.go lists them by
// the Karpenter controller that records them. What only Joiner does (the
// node agent's drain, launch bookkeeping) has reasons of its own, listed
// apart. Events come from source component "karpenter" (Component), as
// Karpenter's do; the node agent's carry its node as the source host.
package events

import (
	"context"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/core/v1"
)

// Component is the source component (and reporting controller) of every
// Event Joiner records: Karpenter's, so `kubectl get events
// --field-selector source=karpenter` finds Joiner's too.
const Component = "karpenter"

// Event is one Kubernetes Event to record.
type Event struct {
	// Object is what the Event is about (a Pod, Node, NodeClaim, NodePool
	// or EC2NodeClass as read from the API server, so its UID is set).
	Object  runtime.Object
	Type    string // corev1.EventTypeNormal or corev1.EventTypeWarning
	Reason  string
	Message string
}

// Publish records evs through rec; Events about no object (a nil pointer)
// are skipped, as Karpenter skips a Node that is not there yet.
func Publish(rec record.EventRecorder, evs ...Event) {
	for _, e := range evs {
		if e.Object == nil {
			continue
		}
		if v := reflect.ValueOf(e.Object); v.Kind() == reflect.Pointer && v.IsNil() {
			continue
		}
		rec.Event(e.Object, e.Type, e.Reason, e.Message)
	}
}

// Scheme knows the core types and Joiner's, so Events can reference
// NodeClaims, NodePools and EC2NodeClasses.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme, awsv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// NewRecorder returns the process's event recorder: client-go's
// broadcaster writing through kube as Component, with host as the source
// host (the node agent's node; "" for the coordinator, as Karpenter). It
// stops when ctx ends. Build one per process.
func NewRecorder(ctx context.Context, kube kubernetes.Interface, host string) record.EventRecorder {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")}) // WithContext: shut down when ctx ends
	return b.NewRecorder(Scheme, corev1.EventSource{Component: Component, Host: host})
}
