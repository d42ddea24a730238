package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

var (
	// SchemeBuilder registers this group's types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds this group's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, knownTypes()...)
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

func knownTypes() []runtime.Object {
	return []runtime.Object{&EC2NodeClass{}, &EC2NodeClassList{}}
}
