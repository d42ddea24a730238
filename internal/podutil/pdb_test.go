package podutil

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A budget whose selector does not parse is named in the error and left
// out; the others still hold their pods.
func TestNewPDBsKeepsTheGoodBudgets(t *testing.T) {
	zero := intstr.FromInt32(0)
	bad := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: "Sometimes"}}}}}
	good := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "frozen", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}}
	pdbs, err := NewPDBs([]*policyv1.PodDisruptionBudget{bad, good})
	if err == nil {
		t.Fatal("no error for the bad selector")
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: "default", Labels: map[string]string{"app": "db"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if why := pdbs.Blocking(p, time.Now(), true); why == "" {
		t.Error("the good fully blocking budget no longer holds its pod")
	}
}
