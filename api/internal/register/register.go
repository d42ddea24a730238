// Package register builds the scheme registration of an API group version.
package register

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Builder registers types (objects and their lists) under gv, with the
// meta/v1 options types every group version carries.
func Builder(gv schema.GroupVersion, types ...runtime.Object) runtime.SchemeBuilder {
	return runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
		s.AddKnownTypes(gv, types...)
		metav1.AddToGroupVersion(s, gv)
		return nil
	})
}
